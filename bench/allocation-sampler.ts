// Preloaded (--import) into the infermeter bench/allocation.ts starts: V8's sampling heap
// profiler over every allocation, collected objects included, from the first SIGUSR2 to the
// second, written as JSON to ALLOCATION_PROFILE.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    return;
  }
  session.post('HeapProfiler.stopSampling', (error, result) => {
    sampling = false;
    if (error === null) writeFileSync(process.env.ALLOCATION_PROFILE!, JSON.stringify(result.profile));
  });
});
