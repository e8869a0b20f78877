// Counts its runs in durable state and the runs of this instance in memory.
import { job, JobFailed } from '../../../guest-sdk/js/cronbox-job.js';

// Runs served by this instance (lost when the instance is retired).
let runsHere = 0;

export const { init, execute, destroy } = job({
  execute(ctx) {
    const count = Number(ctx.get('count') ?? '0') + 1;
    ctx.set('count', String(count));
    runsHere += 1;
    if (ctx.param === 'fail') {
      throw new JobFailed(`failing on purpose after counting ${count}`);
    }
    ctx.log.info(`count is now ${count}`);
    return `count=${count} instance_runs=${runsHere}`;
  },
  destroy() {
    console.log(`counter instance retired after ${runsHere} runs`);
  },
});
