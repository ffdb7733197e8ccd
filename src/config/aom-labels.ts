// The AOM service labels (service_id, group_id, project_id, instance_name, service_name, source)
// and the variables that set them; unset ones are left out, `source` defaults to the host name.
import { LABEL_VALUE, nonEmpty, type Env, type Problem } from './parse/parse.ts';

export const AOM_LABEL_VARIABLES = {
  service_id: 'INFERMETER_AOM_SERVICE_ID',
  group_id: 'INFERMETER_AOM_GROUP_ID',
  project_id: 'INFERMETER_AOM_PROJECT_ID',
  instance_name: 'INFERMETER_AOM_INSTANCE_NAME',
  service_name: 'INFERMETER_AOM_SERVICE_NAME',
  source: 'INFERMETER_AOM_SOURCE',
} as const;

export function parseAomLabels(env: Env, host: string, problem: Problem): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [label, variable] of Object.entries(AOM_LABEL_VARIABLES)) {
    const raw = env[variable];
    const value = nonEmpty(raw) ?? (label === 'source' ? host : undefined);
    if (value === undefined) continue;
    if (LABEL_VALUE.test(value)) labels[label] = value;
    else problem(variable, 'a label value of 1 to 256 printable characters', raw);
  }
  return Object.freeze(labels);
}
