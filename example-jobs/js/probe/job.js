// A test fixture: does what its param names, to prove the sandbox holds for
// JavaScript jobs.
//
// - `raise`: throws an error (a failed run with its stack in the log);
// - `spin`: loops forever (stopped by the timeout or a kill);
// - `hog`: allocates until the memory limit ends the run;
// - `config KEY`: answers with the configuration value of KEY;
// - `state`: writes an oversized value and answers with the error;
// - `context`: answers with the trigger's kind, shard and attempt;
// - `fetch URL`: fetches URL and answers with the status and body;
// - anything else: answers `ok`.
import { job, StateError } from '../../../guest-sdk/js/cronbox-job.js';

export const { init, execute, destroy } = job(async (ctx) => {
  const space = ctx.param.indexOf(' ');
  const verb = space < 0 ? ctx.param : ctx.param.slice(0, space);
  const arg = space < 0 ? '' : ctx.param.slice(space + 1);
  switch (verb) {
    case 'raise':
      throw new TypeError('raised on purpose');
    case 'spin': {
      console.log('spinning');
      let n = 0;
      for (;;) {
        n += 1;
      }
    }
    case 'hog': {
      const hoard = [];
      for (;;) {
        hoard.push(new Uint8Array(1 << 20).fill(1));
      }
    }
    case 'config':
      return `${arg}=${ctx.config(arg)}`;
    case 'state':
      try {
        ctx.set('big', 'x'.repeat(1 << 20));
      } catch (error) {
        if (error instanceof StateError) {
          return `refused: ${error.kind}: ${error.message}`;
        }
        throw error;
      }
      return 'stored';
    case 'context':
      return `${ctx.kind} shard ${ctx.shardIndex}/${ctx.shardTotal} attempt ${ctx.attempt} job ${ctx.jobId} run ${ctx.runId}`;
    case 'fetch': {
      const response = await fetch(arg);
      return `${response.status} ${await response.text()}`;
    }
    default:
      return 'ok';
  }
});
