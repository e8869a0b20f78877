// cronbox jobs in JavaScript, built into components by componentize-js.
//
// A job module exports the functions of world `cronbox:job/job`, made by
// `job`:
//
//     import { job } from './cronbox-job.js';
//
//     export const { init, execute, destroy } = job({
//       execute(ctx) {
//         return `hello, ${ctx.param || 'world'}`;
//       },
//     });
//
// - A returned value (turned into a string; undefined is empty) is success,
//   a returned promise is awaited. `output(value)` makes it a structured
//   output (JSON text), which a workflow's templates read as JSON:
//   `return output({ rows: 3 });`.
// - A thrown `JobFailed` fails the run with its message; any other thrown
//   value fails it with `Name: message`, its stack in the run's log.
// - `console.log` and `console.error` go to the run's log, as do
//   `ctx.log.info(...)` and the other levels.
// - `fetch` reaches the origins the job's definition grants (wasi:http).
//
// Build with `cronbox build`, or
// `componentize-js job.js -w wit -n job-with-config -o job.wasm`.

import {
  current,
  get,
  set,
  remove,
  log as hostLog,
} from 'cronbox:job/context@0.1.0';
import { get as configGet } from 'wasi:config/store@0.2.0-rc.1';

/** `value` as JSON text: a structured output, which a workflow's
 * templates read as JSON. A workflow node's output is at most 64 KiB. */
export function output(value) {
  return JSON.stringify(value);
}

/** Fails the run with this message (no stack in the log). */
export class JobFailed extends Error {
  constructor(message) {
    super(message);
    this.name = 'JobFailed';
  }
}

/** A state write the host refused; the run goes on unless rethrown. */
export class StateError extends Error {
  constructor(kind, limit, message) {
    super(message);
    this.name = 'StateError';
    /** 'key-too-large', 'value-too-large' or 'quota-exceeded'. */
    this.kind = kind;
    /** The host's limit, in bytes. */
    this.limit = limit;
  }
}

const STATE_ERRORS = {
  'key-too-large': (limit) => `state key is empty or longer than ${limit} bytes`,
  'value-too-large': (limit) => `state value is longer than ${limit} bytes`,
  'quota-exceeded': (limit) => `the job's state would exceed ${limit} bytes`,
};

function text(args) {
  return args
    .map((arg) => (typeof arg === 'string' ? arg : JSON.stringify(arg)))
    .join(' ');
}

/** Writes to the run's log at a level. */
const logger = Object.freeze({
  trace: (...args) => hostLog('trace', text(args)),
  debug: (...args) => hostLog('debug', text(args)),
  info: (...args) => hostLog('info', text(args)),
  warn: (...args) => hostLog('warn', text(args)),
  error: (...args) => hostLog('error', text(args)),
});

/** The run now executing, its durable state and its configuration. */
export class Context {
  constructor() {
    const trigger = current();
    /** The trigger's parameter ('' when none was given). */
    this.param = trigger.param;
    this.jobId = trigger.jobId;
    this.runId = trigger.runId;
    /** This run's shard, 0 to shardTotal - 1. */
    this.shardIndex = trigger.shardIndex;
    this.shardTotal = trigger.shardTotal;
    /** Why the run started: schedule, manual, api, retry, parent, misfire. */
    this.kind = trigger.kind;
    /** The instant the run was scheduled for, ms since the Unix epoch. */
    this.scheduledAtMs = Number(trigger.scheduledAtMs);
    /** 0 for a first attempt, n for the n-th retry. */
    this.attempt = trigger.attempt;
    /** Leveled logging to the run's log. */
    this.log = logger;
  }

  /** The job's state for `key` (undefined when not set). */
  get(key) {
    return get(key);
  }

  /** Writes state, committed only if the run succeeds; throws a
   * StateError past the host's size limits. */
  set(key, value) {
    try {
      set(key, String(value));
    } catch (error) {
      const refusal = error && error.payload ? error.payload : error;
      if (refusal && STATE_ERRORS[refusal.tag]) {
        const limit = Number(refusal.val);
        throw new StateError(refusal.tag, limit, STATE_ERRORS[refusal.tag](limit));
      }
      throw error;
    }
  }

  /** Removes `key` from the job's state. */
  remove(key) {
    remove(key);
  }

  /** The job's configuration for `key` (undefined when not set). */
  config(key) {
    try {
      return configGet(key) ?? undefined;
    } catch {
      return undefined;
    }
  }

  /** The tenant's secret `name` when the job references it; masked as
   * ******** wherever the run prints it. */
  secret(name) {
    return this.config(name);
  }
}

/** The run's failure message for a thrown value; logs its stack. */
function failure(error) {
  if (error instanceof JobFailed) {
    return error.message;
  }
  if (error instanceof Error) {
    if (error.stack) {
      hostLog('error', `${error.name}: ${error.message}\n${error.stack}`.trimEnd());
    }
    return `${error.name}: ${error.message}`;
  }
  return String(error);
}

/**
 * Makes the exports of a job from `definition`: an object (or a function
 * returning one) with `execute(ctx)` and optionally `init(ctx)` and
 * `destroy()`; a plain function is taken as `execute`.
 */
export function job(definition) {
  let instance;
  const make = () => {
    if (typeof definition === 'function' && definition.length > 0) {
      return { execute: definition };
    }
    return typeof definition === 'function' ? definition() : definition;
  };
  return {
    init() {
      try {
        instance = make();
        if (instance.init) {
          instance.init(new Context());
        }
      } catch (error) {
        throw failure(error);
      }
    },
    async execute() {
      try {
        instance ??= make();
        const result = await instance.execute(new Context());
        return result === undefined || result === null ? '' : String(result);
      } catch (error) {
        throw failure(error);
      }
    },
    destroy() {
      try {
        instance?.destroy?.();
      } catch (error) {
        failure(error);
      }
    },
  };
}
