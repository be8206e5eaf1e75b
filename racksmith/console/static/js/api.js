// Owns: the operator's token (sessionStorage), every HTTP call to the
// Kubernetes API (same origin, bearer token), ApiError (a Status turned
// into a message with its field causes) and the paths of every resource:
// the management API's (R) and the node-side ones each managed cluster
// serves in its own API (N), reached through the management API's cluster
// proxy (inCluster: /clusters/<ns>/<cluster>/proxy<path>).

const TOKEN_KEY = "racksmith.token";

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

export class ApiError extends Error {
  constructor(code, status) {
    const msg = (status && status.message) || `HTTP ${code}`;
    super(msg);
    this.code = code;
    this.reason = (status && status.reason) || "";
    this.causes = (status && status.details && status.details.causes) || [];
  }
  /** One line per field cause: "spec.roles: Unsupported value ...". */
  describe() {
    if (!this.causes.length) return this.message;
    return this.causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message)).join("\n");
  }
}

let onUnauthorized = () => {};
/** Called when the API answers 401 (token revoked or wrong). */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export async function request(method, path, { body, contentType, signal, tokenOverride } = {}) {
  const headers = { Accept: "application/json",
                    Authorization: `Bearer ${tokenOverride ?? token()}` };
  const init = { method, headers, signal, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = contentType || "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (!resp.ok) {
    let status = null;
    try { status = await resp.json(); } catch (_e) { status = null; }
    if (resp.status === 401 && tokenOverride === undefined) onUnauthorized();
    throw new ApiError(resp.status, status);
  }
  return resp.status === 204 ? null : resp.json();
}

export const get = (path, opts) => request("GET", path, opts);
export const create = (path, obj) =>
  request("POST", `${path}?fieldManager=racksmith-console`, { body: obj });
export const mergePatch = (path, patch) =>
  request("PATCH", `${path}?fieldManager=racksmith-console`,
          { body: patch, contentType: "application/merge-patch+json" });
export const jsonPatch = (path, ops) =>
  request("PATCH", `${path}?fieldManager=racksmith-console`,
          { body: ops, contentType: "application/json-patch+json" });
export const remove = (path) => request("DELETE", path);

/** Check a token against the API server without storing it. */
export async function checkToken(t) {
  await request("GET", "/apis", { tokenOverride: t });
}

// --- resource paths ---------------------------------------------------------

const G = {
  metal3: "/apis/metal3.io/v1alpha1",
  metal: "/apis/metal.racksmith.io/v1alpha1",
  cluster: "/apis/cluster.racksmith.io/v1alpha1",
  lcm: "/apis/lcm.racksmith.io/v1alpha1",
  storage: "/apis/storage.racksmith.io/v1alpha1",
  ipam: "/apis/ipam.racksmith.io/v1alpha1",
};

/** Collection paths, all namespaces (namespaced kinds) or cluster scope. */
export const R = {
  hosts: `${G.metal3}/baremetalhosts`,
  inventories: `${G.metal}/baremetalhostinventories`,
  profiles: `${G.metal}/baremetalhostprofiles`,
  clusters: `${G.cluster}/clusters`,
  machines: `${G.cluster}/machines`,
  releases: `${G.cluster}/clusterreleases`,
  lcmMachines: `${G.lcm}/lcmmachines`,
  plans: `${G.lcm}/clusterupdateplans`,
  backups: `${G.lcm}/controlplanebackups`,
  updateGroups: `${G.lcm}/updategroups`,
  l2templates: `${G.ipam}/l2templates`,
  events: "/api/v1/events",
};

/** Node-side collections (all namespaces, or cluster scope): they live in
 *  each managed cluster's own API, so a path of N is always used through
 *  inCluster(ns, cluster, path), never on its own. */
export const N = {
  nodes: "/api/v1/nodes",
  pods: "/api/v1/pods",
  pvs: "/api/v1/persistentvolumes",
  pvcs: "/api/v1/persistentvolumeclaims",
  storageClasses: "/apis/storage.k8s.io/v1/storageclasses",
  volumes: `${G.storage}/volumes`,
  nodeMaintenance: `${G.lcm}/nodemaintenancerequests`,
  clusterMaintenance: `${G.lcm}/clustermaintenancerequests`,
  clusterLocks: `${G.lcm}/clusterworkloadlocks`,
  nodeLocks: `${G.lcm}/nodeworkloadlocks`,
};

/** Path `path` (of N, or an object under one) inside cluster `ns`/`cluster`,
 *  through the management API's cluster proxy. */
export function inCluster(ns, cluster, path) {
  return `/clusters/${encodeURIComponent(ns)}/${encodeURIComponent(cluster)}/proxy${path}`;
}

/** "ns/name" of the cluster a Machine (or anything with spec.clusterName) belongs to. */
export function clusterKeyOf(obj) {
  const name = (obj && obj.spec && obj.spec.clusterName) || "";
  return name ? `${obj.metadata.namespace}/${name}` : "";
}

const NAMESPACED_GROUP = {
  [R.hosts]: [G.metal, "baremetalhosts"],
  [R.inventories]: [G.metal, "baremetalhostinventories"],
  [R.profiles]: [G.metal, "baremetalhostprofiles"],
  [R.clusters]: [G.cluster, "clusters"],
  [R.machines]: [G.cluster, "machines"],
  [R.lcmMachines]: [G.lcm, "lcmmachines"],
  [R.plans]: [G.lcm, "clusterupdateplans"],
  [R.updateGroups]: [G.lcm, "updategroups"],
  [R.l2templates]: [G.ipam, "l2templates"],
  [R.events]: ["/api/v1", "events"],
};

/** Path of a collection in one namespace (namespaced kinds). */
export function inNamespace(collection, ns) {
  const [base, plural] = NAMESPACED_GROUP[collection];
  return `${base}/namespaces/${encodeURIComponent(ns)}/${plural}`;
}

/** Path of one object. */
export function objectPath(collection, ns, name) {
  const base = NAMESPACED_GROUP[collection] ? inNamespace(collection, ns) : collection;
  return `${base}/${encodeURIComponent(name)}`;
}

/** "ns/name" or "name": the key of an object in an informer. */
export function keyOf(obj) {
  const m = obj.metadata || {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

/** Alerts the console server reads from Alertmanager. */
export const alerts = () => get("/console/alerts");
