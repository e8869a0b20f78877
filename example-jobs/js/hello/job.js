// Greets its param: the smallest JavaScript job.
import { job } from '../../../guest-sdk/js/cronbox-job.js';

export const { init, execute, destroy } = job((ctx) => {
  const who = ctx.param || 'world';
  ctx.log.info(`greeting ${who}`);
  return `hello from js, ${who}`;
});
