// What the scripts here share: one JSON line per step, the client's refusals as data, waiting on a condition
// with a deadline, and the run of a list of steps that stops at the first that throws.

import { ApiException } from '@kubernetes/client-node';

export const WAIT_MS = 20000; // the longest a watch, an informer or a pod may take to show what is waited for

export function emit(step, fields) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + '\n');
}

// What a refused call threw: the client's own ApiException, its code and the Status in its body.
export function refusal(err) {
  if (!(err instanceof ApiException)) {
    throw err;
  }
  let status = null;
  try {
    status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
  } catch {
    status = { unparsed: String(err.body) };
  }
  return {
    apiException: true,
    code: err.code,
    contentType: err.headers?.['content-type'] ?? null,
    status,
  };
}

export async function expectRefusal(call) {
  try {
    const got = await call();
    return { refused: false, got };
  } catch (err) {
    return { refused: true, ...refusal(err) };
  }
}

export function meta(obj) {
  const m = obj?.metadata ?? {};
  return {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    labels: m.labels ?? null,
    managedFields: (m.managedFields ?? []).map((f) => ({
      manager: f.manager, operation: f.operation, subresource: f.subresource ?? null,
    })),
  };
}

// Resolves once check() holds, rejects after `ms`: a deadline, not a sleep.
export function waitFor(what, check, ms = WAIT_MS) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      clearInterval(poll);
      reject(new Error(`${what}: not seen within ${ms} ms`));
    }, ms);
    const poll = setInterval(() => {
      if (check()) {
        clearTimeout(timer);
        clearInterval(poll);
        resolve();
      }
    }, 20);
  });
}

// Runs [name, async fn] steps in order, printing each one's result, or its error as {"threw": ...} and
// stopping there; then `cleanup` (printed as the step "cleanup"). Exits 1 when a step threw.
export async function runSteps(steps, cleanup) {
  let failed = false;
  try {
    for (const [name, run] of steps) {
      try {
        emit(name, await run());
      } catch (err) {
        failed = true;
        let detail;
        try {
          detail = refusal(err);
        } catch {
          detail = { message: String(err?.stack ?? err) };
        }
        emit(name, { threw: detail });
        break;
      }
    }
  } finally {
    try {
      emit('cleanup', await cleanup());
    } catch (err) {
      emit('cleanup', { error: String(err) });
    }
  }
  process.exit(failed ? 1 : 0);
}
