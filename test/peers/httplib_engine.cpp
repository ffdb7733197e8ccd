// A stand-in for llama-server's HTTP layer: cpp-httplib with llama-server's route table (b4747's
// examples/server/server.cpp and current master's tools/server/server.cpp, together), for the
// routing differential test (test/integration/httplib-routing.test.ts). cpp-httplib decodes the
// path (`%XX` and `%uXXXX`) and matches the routes as llama-server's does; each answer says which
// route served it (`x-served`) and streams a recognisable body with token counts in OpenAI's
// shape (7 generated, 3 prompt), so the proxy's taps can count them. Binds 127.0.0.1 on a free
// port and prints `PORT <n>` once it listens.
#include <cstdio>
#include <string>

#include "httplib.h"

static const int TOKENS = 7;

// The request's "model" string, as written (the test's names need no unescaping), or "m".
static std::string model_of(const std::string &body) {
  const std::string key = "\"model\":\"";
  auto at = body.find(key);
  if (at == std::string::npos) return "m";
  at += key.size();
  auto end = body.find('"', at);
  return end == std::string::npos ? "m" : body.substr(at, end - at);
}

static std::string stream_of(const std::string &kind, const std::string &model) {
  std::string out;
  for (int i = 0; i < TOKENS; i++) {
    std::string t = "t" + std::to_string(i);
    if (kind == "chat")
      out += "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"" + model +
             "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + t + "\"},\"finish_reason\":null}]}\n\n";
    else
      out += "data: {\"id\":\"c\",\"object\":\"text_completion\",\"created\":0,\"model\":\"" + model +
             "\",\"choices\":[{\"index\":0,\"text\":\"" + t + "\",\"finish_reason\":null}]}\n\n";
  }
  out += "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"" + model +
         "\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
  out += "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"" + model +
         "\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7,\"total_tokens\":10}}\n\n";
  out += "data: [DONE]\n\n";
  return out;
}

// A generating route: the body streamed in chunks, one event each.
static httplib::Server::Handler streamed(const std::string &served, const std::string &kind) {
  return [served, kind](const httplib::Request &req, httplib::Response &res) {
    res.set_header("x-served", served);
    auto body = std::make_shared<std::string>(stream_of(kind, model_of(req.body)));
    auto sent = std::make_shared<size_t>(0);
    res.set_chunked_content_provider("text/event-stream", [body, sent](size_t, httplib::DataSink &sink) {
      auto end = body->find("\n\n", *sent);
      if (end == std::string::npos) {
        sink.done();
        return true;
      }
      sink.write(body->data() + *sent, end + 2 - *sent);
      *sent = end + 2;
      return true;
    });
  };
}

static httplib::Server::Handler json(const std::string &served, const std::string &content) {
  return [served, content](const httplib::Request &req, httplib::Response &res) {
    res.set_header("x-served", served);
    std::string body = content;
    auto at = body.find("MODEL");
    if (at != std::string::npos) body.replace(at, 5, model_of(req.body));
    res.set_content(body, "application/json");
  };
}

int main() {
  httplib::Server svr;
  const std::string embeddings = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,\"embedding\":[0.0]}],"
                                 "\"model\":\"MODEL\",\"usage\":{\"prompt_tokens\":3,\"total_tokens\":3}}";
  const std::string responses = "{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"MODEL\",\"output\":[],"
                                "\"usage\":{\"input_tokens\":3,\"output_tokens\":7,\"total_tokens\":10}}";
  const std::string messages = "{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"MODEL\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
                               "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":3,\"output_tokens\":7}}";
  const std::string other = "{}";
  // b4747 and master alike.
  svr.Post("/completion", streamed("completions", "completions"));
  svr.Post("/completions", streamed("completions", "completions"));
  svr.Post("/v1/completions", streamed("completions", "completions"));
  svr.Post("/chat/completions", streamed("chat", "chat"));
  svr.Post("/v1/chat/completions", streamed("chat", "chat"));
  svr.Post("/infill", streamed("completions", "completions"));
  svr.Post("/embedding", json("embeddings", embeddings));
  svr.Post("/embeddings", json("embeddings", embeddings));
  svr.Post("/v1/embeddings", json("embeddings", embeddings));
  // Master only.
  svr.Post("/v1/responses", json("responses", responses));
  svr.Post("/responses", json("responses", responses));
  svr.Post("/v1/messages", json("messages", messages));
  // Not generation: passed through unmeasured.
  for (const char *path : {"/v1/messages/count_tokens", "/rerank", "/reranking", "/v1/rerank", "/v1/reranking", "/tokenize",
                           "/detokenize", "/apply-template", "/props", "/lora-adapters"})
    svr.Post(path, json("other", other));
  svr.Get("/health", json("other", other));
  svr.Get("/v1/models", json("other", other));
  int port = svr.bind_to_any_port("127.0.0.1");
  if (port < 0) return 1;
  std::printf("PORT %d\n", port);
  std::fflush(stdout);
  return svr.listen_after_bind() ? 0 : 1;
}
