// `infermeter --help`: the commands and every configuration variable with its default and
// meaning, printed from the configuration table (config/variables.ts) that the validation and
// the README share.
import { docOf, type Row } from '../config/variables/variable-table.ts';
import { CONFIGURATION_TABLE } from '../config/variables.ts';

const WIDTH = 100;
const INDENT = '      ';

/** `table`: the variables table (a test adds a row to it). */
export function helpText(version: string, table: readonly Row[] = CONFIGURATION_TABLE): string {
  const lines = [
    `infermeter ${version}: a metering reverse proxy for OpenAI-compatible model servers`,
    '',
    'Usage:',
    '  infermeter                      start the proxy, configured by the environment variables below',
    '  infermeter sim [--port N] [--host H]',
    '                                  start the simulated model server alone (default 127.0.0.1:8000)',
    '                                  and print its URL, to try infermeter without a model server',
    '  infermeter demo [--duration S]  the simulated server, the proxy in front of it and a little traffic',
    '  infermeter usage report --dir D [--from T] [--to T] [--format table|csv]',
    '                                  requests and tokens per tenant and model from a usage spool',
    '  infermeter usage verify --dir D [--metrics URL|FILE]',
    '                                  sequence gaps, duplicate ids, and token sums against a scrape',
    '  infermeter --help, -h           this text',
    '  infermeter --version            the version',
    '',
    'Example:',
    '  infermeter sim &',
    '  INFERMETER_UPSTREAM=http://127.0.0.1:8000 infermeter',
    '  # clients: base URL http://127.0.0.1:1025/v1; Prometheus: http://127.0.0.1:1027/metrics',
    '',
    'Configuration: environment variables, read once at start. A bad value, or an INFERMETER_*',
    'variable not listed here, stops the start with a message naming it.',
    '',
  ];
  for (const v of table.map(docOf)) {
    lines.push(`  ${v.name}`);
    lines.push(...wrap(`default: ${plain(v.default)}`));
    lines.push(...wrap(plain(v.meaning)));
  }
  lines.push('', 'Details: README.md and docs/, shipped in the package.', '');
  return lines.join('\n');
}

/** Markdown to terminal text: code spans lose their backticks, links keep their text. */
function plain(markdown: string): string {
  return markdown.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replaceAll('`', '');
}

function wrap(text: string): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && INDENT.length + line.length + 1 + word.length > WIDTH) {
      out.push(INDENT + line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') out.push(INDENT + line);
  return out;
}
