import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { dropDuplicateSeries, ExpositionError, formatExposition, parseExposition } from '../../src/engine/exposition-parser.ts';

describe('exposition parser', () => {
  it('reads families, types, labels with escapes, special values and timestamps', () => {
    const text = [
      '# HELP http_requests_total The total number of HTTP requests.',
      '# TYPE http_requests_total counter',
      'http_requests_total{method="post",code="200"} 1027 1395066363000',
      'http_requests_total{method="post",code="400"}    3 1395066363000',
      '# A comment',
      'msdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",error="Cannot find file:\\n\\"FILE.TXT\\""} 1.458255915e9',
      '# TYPE rpc_duration_seconds summary',
      'rpc_duration_seconds{quantile="0.5"} NaN',
      'rpc_duration_seconds_sum 1.7560473e+07',
      'rpc_duration_seconds_count 2693',
      '# TYPE h histogram',
      'h_bucket{le="+Inf"} 3',
      'h_sum -Inf',
      'h_count 3',
    ].join('\n');
    const families = parseExposition(text);
    assert.deepEqual(
      families.map((f) => [f.name, f.type, f.samples.length]),
      [
        ['http_requests_total', 'counter', 2],
        ['msdos_file_access_time_seconds', 'untyped', 1],
        ['rpc_duration_seconds', 'summary', 3],
        ['h', 'histogram', 3],
      ],
    );
    assert.deepEqual(families[1]!.samples[0]!.labels, { path: 'C:\\DIR\\FILE.TXT', error: 'Cannot find file:\n"FILE.TXT"' });
    assert.equal(families[0]!.samples[0]!.timestamp, '1395066363000');
    assert.ok(Number.isNaN(families[2]!.samples[0]!.value));
    // Written back and read again: the same families.
    assert.deepEqual(parseExposition(formatExposition(families)), families);
  });

  it('refuses malformed input, naming the line', () => {
    for (const [text, line] of [
      ['ok 1\nbad-name 1', 2],
      ['x{a="1" 1', 1],
      ['x{a=1} 1', 1],
      ['x 1 2 3', 1],
      ['x abc', 1],
      ['# TYPE x bogus', 1],
      ['x{a="\\q"} 1', 1],
      ['# TYPE h histogram\nh_bucket 1', 2],
      ['x{a="1",a="2"} 1', 1],
    ] as const) {
      assert.throws(
        () => parseExposition(text),
        (e: unknown) => e instanceof ExpositionError && e.line === line,
        text,
      );
    }
  });

  it('drops every later sample of a series: label order, empty labels and families do not make another one', () => {
    const text = [
      '# TYPE a gauge',
      'a{x="1",y="2"} 1',
      'a{y="2",x="1"} 2', // the same labels in another order
      'a{x="1",y="2",z=""} 3', // an empty label is no label
      'a{x="1",y="3"} 4', // another series
      '# TYPE b gauge',
      'b 5',
      'a{x="1",y="2"} 6', // after another family: merged into a, still a duplicate
      '# TYPE c_total gauge',
      'c_total 7',
      '# TYPE c counter',
      'c_total 8', // the same sample name under another family, which is left empty and dropped
      '# TYPE d gauge',
      'd{m="\ufffd"} 9',
    ].join('\n');
    const { families, dropped } = dropDuplicateSeries(parseExposition(text));
    assert.equal(dropped, 4);
    assert.equal(
      formatExposition(families),
      [
        '# TYPE a gauge',
        'a{x="1",y="2"} 1',
        'a{x="1",y="3"} 4',
        '# TYPE b gauge',
        'b 5',
        '# TYPE c_total gauge',
        'c_total 7',
        '# TYPE d gauge',
        'd{m="\ufffd"} 9',
        '',
      ].join('\n'),
    );
    const clean = parseExposition('# TYPE a gauge\na{x="1"} 1\na{x="2"} 2\n');
    assert.deepEqual(dropDuplicateSeries(clean), { families: clean, dropped: 0 }, 'nothing to drop: the same families');
  });
});
