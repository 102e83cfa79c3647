// The JavaScript client (@kubernetes/client-node) with a pod on a real kubelet: logs, exec and port-forward.
//
//   node tests/js/pod_test.mjs KUBECONFIG NAMESPACE NODE
//
// Makes NAMESPACE (and its default ServiceAccount: no controller-manager runs), a busybox pod bound to NODE,
// waits for it to run through a watch with a fieldSelector, reads its log (once, then followed), runs commands
// in it over the client's websocket exec (stdout, stderr, a non-zero exit, stdin), forwards a local port to its
// httpd, and deletes it. One JSON line per step, as client_test.mjs; tests/integration/test_js_client.py judges
// them.

import http from 'node:http';
import net from 'node:net';
import { PassThrough, Readable } from 'node:stream';

import { CoreV1Api, Exec, KubeConfig, Log, PortForward, Watch } from '@kubernetes/client-node';

import { expectRefusal, runSteps, waitFor } from './steps.mjs';

const [kubeconfigPath, ns, node] = process.argv.slice(2);
if (!kubeconfigPath || !ns || !node) {
  console.error('usage: node pod_test.mjs KUBECONFIG NAMESPACE NODE');
  process.exit(2);
}
const POD_MS = 60000; // the pod's start on the kubelet (the image is local)

const kc = new KubeConfig();
kc.loadFromFile(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);

// Collects what a stream is written, as text.
function sink() {
  const stream = new PassThrough();
  const out = { stream, text: '', ended: false };
  stream.on('data', (chunk) => { out.text += chunk.toString(); });
  stream.on('end', () => { out.ended = true; });
  return out;
}

// Runs a command in the pod over the websocket; resolves with what came back once the socket closed.
async function exec(command, stdinText = null) {
  const stdout = sink();
  const stderr = sink();
  let status = null;
  let closed = null;
  const stdin = stdinText === null ? null : Readable.from([Buffer.from(stdinText)]);
  const ws = await new Exec(kc).exec(ns, 'p', 'c', command, stdout.stream, stderr.stream, stdin, false, (s) => {
    status = s;
  });
  ws.on('close', (code) => { closed = code; });
  await waitFor(`exec ${JSON.stringify(command)} to end`, () => closed !== null);
  return { protocol: ws.protocol, stdout: stdout.text, stderr: stderr.text, status };
}

const podEvents = [];
let podWatch = null;

const steps = [
  ['setup', async () => {
    await core.createNamespace({ body: { metadata: { name: ns } } });
    const sa = await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'default' } } });
    return { serviceAccount: sa.metadata.name };
  }],
  ['createPod', async () => {
    const pod = await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'p', labels: { app: 'js' } },
        spec: {
          nodeName: node,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 1,
          containers: [{
            name: 'c',
            image: 'minik8s/busybox:1.35',
            imagePullPolicy: 'IfNotPresent',
            command: ['sh', '-c', 'echo hello-from-js; echo second line; mkdir /www; echo served-in-the-pod > /www/index.html; '
              + 'httpd -p 8080 -h /www; exec sleep 3600'],
          }],
        },
      },
    });
    podWatch = await new Watch(kc).watch(
      `/api/v1/namespaces/${ns}/pods`,
      { fieldSelector: 'metadata.name=p', resourceVersion: pod.metadata.resourceVersion },
      (type, obj) => podEvents.push({ type, phase: obj?.status?.phase ?? null, deleting: Boolean(obj?.metadata?.deletionTimestamp) }),
      () => {},
    );
    return { phase: pod.status?.phase ?? null, nodeName: pod.spec.nodeName, serviceAccountName: pod.spec.serviceAccountName };
  }],
  ['running', async () => {
    await waitFor('the pod Running', () => podEvents.some((e) => e.phase === 'Running'), POD_MS);
    return { types: [...new Set(podEvents.map((e) => e.type))], phases: [...new Set(podEvents.map((e) => e.phase))] };
  }],
  ['log', async () => {
    // the lines are written as the container starts; read until both are there, within the deadline
    let text = '';
    const deadline = Date.now() + POD_MS;
    while (!text.includes('second line') && Date.now() < deadline) {
      const out = sink();
      await new Log(kc).log(ns, 'p', 'c', out.stream, { follow: false });
      await waitFor('the log response to end', () => out.ended);
      text = out.text;
    }
    return { text };
  }],
  ['logFollow', async () => {
    const out = sink();
    const abort = await new Log(kc).log(ns, 'p', 'c', out.stream, { follow: true, tailLines: 1 });
    await waitFor('the followed log', () => out.text.includes('second line'));
    const stillOpen = !out.ended; // a followed log stays open while the container runs
    abort.abort();
    return { text: out.text, stillOpen };
  }],
  ['logRefused', async () => expectRefusal(() => new Log(kc).log(ns, 'p', 'nope', sink().stream, { follow: false }))],
  ['exec', async () => exec(['sh', '-c', 'echo out; echo err >&2; exit 3'])],
  ['execOk', async () => exec(['sh', '-c', 'echo fine'])],
  ['execStdin', async () => exec(['sh', '-c', 'tr a-z A-Z'], 'from stdin\n')],
  ['portForward', async () => {
    // as `kubectl port-forward`: a local listener, each connection forwarded over its own websocket
    const protocols = [];
    const server = net.createServer(async (socket) => {
      try {
        const ws = await new PortForward(kc).portForward(ns, 'p', [8080], socket, null, socket);
        protocols.push(ws.protocol);
        socket.on('close', () => ws.close());
      } catch (err) {
        socket.destroy(err);
      }
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address();
      const body = await new Promise((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 20000 }, (res) => {
          let text = '';
          res.on('data', (chunk) => { text += chunk; });
          res.on('end', () => resolve({ status: res.statusCode, text }));
        });
        req.on('timeout', () => req.destroy(new Error('no answer through the port-forward within 20 s')));
        req.on('error', reject);
      });
      return { ...body, protocols };
    } finally {
      server.close();
    }
  }],
  ['deletePod', async () => {
    const pod = await core.deleteNamespacedPod({ name: 'p', namespace: ns });
    await waitFor('the pod DELETED', () => podEvents.some((e) => e.type === 'DELETED'), POD_MS);
    return { kind: pod.kind, deletionTimestamp: Boolean(pod.metadata?.deletionTimestamp), gracePeriod: pod.metadata?.deletionGracePeriodSeconds ?? null,
      lastTypes: podEvents.slice(-1).map((e) => e.type) };
  }],
];

await runSteps(steps, async () => {
  podWatch?.abort();
  await core.deleteNamespace({ name: ns });
  return { deleted: ns };
});
