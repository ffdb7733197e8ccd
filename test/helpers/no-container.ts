// The container sources of a metrics instance built in a test or a bench: no cgroup, no /proc,
// no vendor tool answering, on the caller's clock. Pass `gpu`/`npu` to have those families.
import type { ContainerSamplerOptions } from '../../src/metrics/container/container-sampler.ts';

export function noContainer(now: () => number, options: Partial<Pick<ContainerSamplerOptions, 'hostCpus' | 'gpu' | 'npu'>> = {}): ContainerSamplerOptions {
  return {
    paths: { cgroupRoot: '/nonexistent', procRoot: '/nonexistent' },
    hostCpus: 1,
    hostMemoryBytes: 1,
    gpu: false,
    npu: false,
    ...options,
    run: async () => undefined,
    now,
  };
}
