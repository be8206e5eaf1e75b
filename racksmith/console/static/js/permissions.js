// Owns: what the signed-in user may do, asked of the API server with
// SelfSubjectAccessReview (the question `kubectl auth can-i` asks), once per
// action and token. Pages ask `denied(...)` while rendering: it answers at
// once from what is known (undefined while the answer is on its way, so
// nothing is disabled by mistake) and calls the page's `onAnswer` when a
// new answer arrives, so the page renders again. A button the user's role
// may not use is disabled with the reason (docs/access.md). What a page
// does inside a managed cluster goes through the cluster proxy: the
// question is then the proxy's (deniedInCluster), since inside the cluster
// the console acts as its own identity.

import { request, token } from "./api.js";

const answers = new Map(); // "<token>|verb|group|resource|ns" -> true | false
const pending = new Map(); // same key -> [callbacks]

/** Why the signed-in user may not `verb` `resource` (of `group`, in `namespace`), or
 *  undefined when allowed or not known yet; `onAnswer` is called once it is known. */
export function denied(verb, group, resource, namespace = "", onAnswer = () => {},
                       { subresource = "", what = "" } = {}) {
  const key = [token(), verb, group, resource, subresource, namespace].join("|");
  if (answers.has(key)) {
    return answers.get(key) ? undefined
      : `Your role may not ${verb} ${what || `${resource}${namespace ? ` in ${namespace}` : ""}`}.`;
  }
  if (pending.has(key)) { pending.get(key).push(onAnswer); return undefined; }
  pending.set(key, [onAnswer]);
  const review = {
    apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview",
    spec: { resourceAttributes: { verb, group, resource, namespace,
                                  ...(subresource ? { subresource } : {}) } },
  };
  request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", { body: review })
    .then((r) => answers.set(key, !!(r && r.status && r.status.allowed)))
    // No answer (network, old server): let the API decide at click time.
    .catch(() => answers.set(key, true))
    .finally(() => {
      const waiting = pending.get(key) || [];
      pending.delete(key);
      for (const fn of waiting) { try { fn(); } catch (_e) { /* a page gone */ } }
    });
  return undefined;
}

/** Why the signed-in user may not `verb` `resource` inside cluster
 *  `clusterKey` ("ns/name"): the cluster proxy's verb (GET → get, POST →
 *  create, DELETE → delete...) on `clusters/proxy` in the cluster's namespace. */
export function deniedInCluster(verb, resource, clusterKey, onAnswer = () => {}) {
  const ns = clusterKey.split("/")[0];
  return denied(verb, "cluster.racksmith.io", "clusters", ns, onAnswer,
                { subresource: "proxy", what: `${resource} in cluster ${clusterKey}` });
}
