// The last step of the example ETL workflow (example-jobs/etl): its param
// is the transformed records as one JSON array; its output what it
// loaded.
import { JobFailed, job, output } from '../../../guest-sdk/js/cronbox-job.js';

export const { init, execute, destroy } = job((ctx) => {
  const records = JSON.parse(ctx.param || '[]');
  if (!Array.isArray(records)) throw new JobFailed('param must be a JSON array of records');
  const letters = records.reduce((sum, record) => sum + record.length, 0);
  ctx.log.info(`loading ${records.length} records`);
  return output({ loaded: records.length, letters, names: records.map((r) => r.name) });
});
