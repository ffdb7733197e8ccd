// Java's built-in HTTP client (java.net.http.HttpClient) as applications use it: HTTP/2 by
// default, which on http:// is an h2c upgrade offer on every request. Run by
// test/integration/http2-clients.test.ts (single-file source launch: `java H2cClient.java`):
// for each argument `METHOD URL [BODY]` (tab-separated), one request, and one line out:
// `status<TAB>protocol<TAB>body with newlines as \n`, or `error<TAB>the exception`.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class H2cClient {
  public static void main(String[] args) throws Exception {
    HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    for (String arg : args) {
      String[] parts = arg.split("\t", 3);
      HttpRequest.BodyPublisher body = parts.length > 2 ? HttpRequest.BodyPublishers.ofString(parts[2]) : HttpRequest.BodyPublishers.noBody();
      HttpRequest request = HttpRequest.newBuilder(URI.create(parts[1])).timeout(Duration.ofSeconds(20)).header("content-type", "application/json").method(parts[0], body).build();
      try {
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println(response.statusCode() + "\t" + response.version() + "\t" + response.body().replace("\n", "\\n"));
      } catch (Exception e) {
        System.out.println("error\t" + e);
      }
    }
  }
}
