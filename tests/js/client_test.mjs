// The JavaScript client (@kubernetes/client-node) against a minik8s apiserver.
//
//   node tests/js/client_test.mjs KUBECONFIG NAMESPACE
//
// Makes NAMESPACE, runs the steps a client's user runs (typed CoreV1Api calls, each patch type, the generic
// KubernetesObjectApi with its discovery, a watch, an informer) and prints one JSON line per step,
// {"step": NAME, ...what it saw}, or {"step": NAME, "threw": ...} and exits 1 when a step threw.
// The caller (tests/integration/test_js_client.py) judges what each step saw; this script only records it.
// The namespace is deleted at the end, whatever happened.

import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  VersionApi,
  Watch,
  makeInformer,
  setHeaderOptions,
} from '@kubernetes/client-node';

import { expectRefusal, meta, runSteps, waitFor } from './steps.mjs';

const [kubeconfigPath, ns] = process.argv.slice(2);
if (!kubeconfigPath || !ns) {
  console.error('usage: node client_test.mjs KUBECONFIG NAMESPACE');
  process.exit(2);
}

const kc = new KubeConfig();
kc.loadFromFile(kubeconfigPath);
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const objects = KubernetesObjectApi.makeApiClient(kc);

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const strategicPatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

const steps = [
  ['version', async () => {
    const v = await kc.makeApiClient(VersionApi).getCode();
    return { gitVersion: v.gitVersion, major: v.major, minor: v.minor };
  }],
  ['discovery', async () => {
    const list = await core.getAPIResources();
    const cm = list.resources.find((r) => r.name === 'configmaps');
    return { groupVersion: list.groupVersion, configmaps: cm ? { kind: cm.kind, namespaced: cm.namespaced, verbs: cm.verbs } : null };
  }],
  ['createNamespace', async () => meta(await core.createNamespace({ body: { metadata: { name: ns } } }))],
  ['create', async () => {
    const made = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'one', labels: { app: 'js' } }, data: { k: 'v' } },
    });
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'two' }, data: { k: 'w' } } });
    return { ...meta(made), data: made.data, kind: made.kind, apiVersion: made.apiVersion };
  }],
  ['get', async () => {
    const got = await core.readNamespacedConfigMap({ name: 'one', namespace: ns });
    return { ...meta(got), data: got.data };
  }],
  ['listByLabel', async () => {
    const list = await core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'app=js' });
    return { names: list.items.map((c) => c.metadata.name), resourceVersion: list.metadata.resourceVersion, kind: list.kind };
  }],
];

// The watch starts from a list's resourceVersion and records every event until the steps after it are seen.
const events = [];
let watchAbort = null;
let watchDone = null;
steps.push(['watchStart', async () => {
  const list = await core.listNamespacedConfigMap({ namespace: ns });
  const rv = list.metadata.resourceVersion;
  watchAbort = await new Watch(kc).watch(
    `/api/v1/namespaces/${ns}/configmaps`,
    { resourceVersion: rv, allowWatchBookmarks: true },
    (type, obj) => events.push({ type, name: obj?.metadata?.name, resourceVersion: obj?.metadata?.resourceVersion, data: obj?.data ?? null }),
    (err) => { watchDone = err ? String(err) : 'closed'; },
  );
  return { resourceVersion: rv, started: watchDone === null };
}]);

steps.push(
  ['mergePatch', async () => {
    const got = await core.patchNamespacedConfigMap({ name: 'one', namespace: ns, body: { data: { k2: 'v2' } } }, mergePatch);
    return { ...meta(got), data: got.data };
  }],
  ['strategicMergePatch', async () => {
    const got = await core.patchNamespacedConfigMap(
      { name: 'two', namespace: ns, body: { metadata: { labels: { tier: 'b' } }, data: { k: 'changed' } } }, strategicPatch);
    return { ...meta(got), data: got.data };
  }],
  ['jsonPatch', async () => {
    // the client's default patch type for a typed call is application/json-patch+json
    const got = await core.patchNamespacedConfigMap({
      name: 'one', namespace: ns, body: [{ op: 'remove', path: '/data/k' }, { op: 'add', path: '/data/k3', value: 'v3' }],
    });
    return { ...meta(got), data: got.data };
  }],
  ['replace', async () => {
    const cur = await core.readNamespacedConfigMap({ name: 'two', namespace: ns });
    cur.data = { only: 'this' };
    const got = await core.replaceNamespacedConfigMap({ name: 'two', namespace: ns, body: cur });
    return { ...meta(got), data: got.data, previousResourceVersion: cur.metadata.resourceVersion };
  }],
  ['staleReplace', async () => {
    // the resourceVersion of before the replace: upstream's optimistic concurrency refuses it, 409 Conflict
    const body = { metadata: { name: 'two', namespace: ns, resourceVersion: '1' }, data: { stale: 'yes' } };
    return expectRefusal(() => core.replaceNamespacedConfigMap({ name: 'two', namespace: ns, body }));
  }],
  ['serverSideApply', async () => {
    const got = await objects.patch(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'three', namespace: ns }, data: { a: '1' } },
      undefined, undefined, 'js-client-test', true, PatchStrategy.ServerSideApply);
    return { ...meta(got), data: got.data };
  }],
  ['genericRead', async () => {
    // KubernetesObjectApi finds the resource from its kind through discovery (/apis/apps/v1), as kubectl
    const dep = {
      apiVersion: 'apps/v1', kind: 'Deployment',
      metadata: { name: 'web', namespace: ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'minik8s/httpd:1' }] } },
      },
    };
    await objects.create(dep);
    const got = await objects.read({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: ns } });
    const typed = await apps.listNamespacedDeployment({ namespace: ns });
    return { ...meta(got), kind: got.kind, replicas: got.spec?.replicas, typedNames: typed.items.map((d) => d.metadata.name) };
  }],
  ['scale', async () => {
    // the scale subresource, then an apply of the replicas by another manager: a conflict with the scaler
    const scale = await apps.patchNamespacedDeploymentScale(
      { name: 'web', namespace: ns, body: { spec: { replicas: 2 } } }, mergePatch);
    const dep = await apps.readNamespacedDeployment({ name: 'web', namespace: ns });
    const conflict = await expectRefusal(() => objects.patch(
      { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: ns }, spec: { replicas: 5 } },
      undefined, undefined, 'js-client-test', false, PatchStrategy.ServerSideApply));
    return {
      scale: { kind: scale.kind, apiVersion: scale.apiVersion, replicas: scale.spec?.replicas, selector: scale.status?.selector },
      replicas: dep.spec.replicas, managedFields: meta(dep).managedFields, conflict,
    };
  }],
  ['delete', async () => {
    const got = await core.deleteNamespacedConfigMap({ name: 'one', namespace: ns });
    return { kind: got.kind, status: got.status ?? null, details: got.details ?? null };
  }],
  ['notFound', async () => expectRefusal(() => core.readNamespacedConfigMap({ name: 'one', namespace: ns }))],
  ['alreadyExists', async () => expectRefusal(() => core.createNamespacedConfigMap({
    namespace: ns, body: { metadata: { name: 'two' }, data: {} },
  }))],
  ['invalid', async () => expectRefusal(() => core.createNamespacedConfigMap({
    namespace: ns, body: { metadata: { name: 'Not_A_Name' }, data: { k: 'v' } },
  }))],
  ['watchEvents', async () => {
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'four' }, data: { k: '4' } } });
    const seen = (type, name) => events.some((e) => e.type === type && e.name === name);
    await waitFor('watch events', () => seen('MODIFIED', 'one') && seen('MODIFIED', 'two') && seen('ADDED', 'three')
      && seen('DELETED', 'one') && seen('ADDED', 'four'));
    const closedEarly = watchDone; // before our abort, which ends it with an AbortError
    watchAbort?.abort();
    return { events: events.filter((e) => e.type !== 'BOOKMARK'), closedEarly };
  }],
  ['informer', async () => {
    // list then watch, as controllers written on the client do
    const path = `/api/v1/namespaces/${ns}/configmaps`;
    const informer = makeInformer(kc, path, () => core.listNamespacedConfigMap({ namespace: ns }));
    const added = [];
    const updated = [];
    let informerError = null;
    informer.on('add', (obj) => added.push(obj.metadata.name));
    informer.on('update', (obj) => updated.push(obj.metadata.name));
    informer.on('error', (err) => { informerError = String(err); });
    await informer.start();
    try {
      await core.patchNamespacedConfigMap({ name: 'four', namespace: ns, body: { data: { k: 'informed' } } }, mergePatch);
      await waitFor('informer update of four', () => updated.includes('four') || informerError !== null);
      const cached = informer.get('four', ns);
      return {
        added: [...added].sort(),
        updated,
        cachedData: cached?.data ?? null,
        listed: informer.list(ns).map((c) => c.metadata.name).sort(),
        informerError,
      };
    } finally {
      await informer.stop();
    }
  }],
);

await runSteps(steps, async () => {
  watchAbort?.abort();
  await core.deleteNamespace({ name: ns });
  return { deleted: ns };
});
