// Owns: list+watch caches of API collections, shared by every view that
// shows the same collection (one LIST, then one WATCH stream per URL).
// Protocol: the first LIST page (limit 100) is shown at once; the rest
// follow (limit 1000) with `synced` false until the last page; the WATCH
// starts at the first page's resourceVersion (so nothing between pages is
// missed; replays are idempotent), with bookmarks; a dropped stream resumes
// from the last resourceVersion seen, 410 Gone relists; the WATCH is a
// WebSocket (see watch()). Subscribers are
// called at most once per animation frame. A node-side collection lives in
// each managed cluster's own API: clusterInformer() is its informer in one
// cluster, PerCluster follows the Clusters and keeps one per cluster (both
// through the management API's cluster proxy, the same protocol).

import { ApiError, R, get, inCluster, keyOf, token } from "./api.js";

const STOP_GRACE_MS = 5000;
const WATCH_PROTOCOL = "watch.racksmith.io";
const BEARER_PROTOCOL = "base64url.bearer.authorization.k8s.io.";

const b64url = (t) => btoa(t).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

/** A watch connection that failed or broke: relist (the LIST says why, e.g. 401). */
class WatchBroken extends Error {}
const instances = new Map();

const schedule = typeof requestAnimationFrame === "function"
  ? (fn) => requestAnimationFrame(fn) : (fn) => setTimeout(fn, 16);

export class Informer {
  constructor(path, query = {}) {
    this.path = path;
    this.query = query;
    this.items = new Map();
    this.synced = false;
    this.error = null;
    this.rv = "";
    this.subs = new Set();
    this.socket = null;
    this.running = false;
    this.pending = false;
    this.stopTimer = null;
    this.generation = 0;
  }

  /** Objects as an array (insertion order). */
  list() { return Array.from(this.items.values()); }

  get(key) { return this.items.get(key); }

  subscribe(fn) {
    this.subs.add(fn);
    if (this.stopTimer) { clearTimeout(this.stopTimer); this.stopTimer = null; }
    if (!this.running) this.start();
    else if (this.items.size || this.synced) schedule(() => fn(this));
    return () => {
      this.subs.delete(fn);
      if (!this.subs.size) {
        this.stopTimer = setTimeout(() => this.stop(), STOP_GRACE_MS);
      }
    };
  }

  notify() {
    if (this.pending) return;
    this.pending = true;
    schedule(() => {
      this.pending = false;
      for (const fn of Array.from(this.subs)) {
        try { fn(this); } catch (e) { console.error(e); }
      }
    });
  }

  url(extra) {
    const q = new URLSearchParams({ ...this.query, ...extra });
    return `${this.path}?${q}`;
  }

  start() {
    this.running = true;
    const gen = ++this.generation;
    this.run(gen).catch((e) => console.error(e));
  }

  stop() {
    this.running = false;
    this.generation++;
    if (this.socket) this.socket.close();
    instances.delete(this.cacheKey);
  }

  async relist(gen) {
    const fresh = new Map();
    let first = true;
    let cont = "";
    let rv = "";
    do {
      const page = await get(this.url(cont ? { limit: 1000, continue: cont }
                                            : { limit: first ? 100 : 1000 }));
      if (gen !== this.generation) return false;
      if (first) rv = page.metadata.resourceVersion;
      for (const o of page.items) fresh.set(keyOf(o), o);
      cont = page.metadata.continue || "";
      if (first || !cont) {
        this.items = first && cont ? new Map(fresh) : fresh;
        this.synced = !cont;
        this.notify();
      }
      first = false;
    } while (cont);
    this.items = fresh;
    this.synced = true;
    this.rv = rv;
    this.error = null;
    this.notify();
    return true;
  }

  async run(gen) {
    let backoff = 500;
    let needList = true;
    while (gen === this.generation) {
      try {
        if (needList) {
          if (!(await this.relist(gen))) return;
          needList = false;
        }
        const expired = await this.watch(gen);
        if (expired) needList = true;
        backoff = 500;
      } catch (e) {
        if (gen !== this.generation) return;
        if (e instanceof ApiError && e.code === 410) { needList = true; continue; }
        if (e instanceof WatchBroken) needList = true;
        this.error = e instanceof ApiError ? e.message : `connection lost (${e.message || e})`;
        this.notify();
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /**
   * Follow the watch over a WebSocket (one event per message; the token
   * travels as a subprotocol, as kube-apiserver accepts, since a browser
   * cannot set headers on a WebSocket — and WebSockets do not count against
   * the six HTTP/1.1 connections a page may hold to one host). Resolves true
   * when the resourceVersion expired (410), false when the server ended the
   * stream; rejects when the connection could not be opened or broke.
   */
  watch(gen) {
    return new Promise((resolve, reject) => {
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const url = `${scheme}//${location.host}${this.url({ watch: "1", resourceVersion: this.rv,
        allowWatchBookmarks: "true", timeoutSeconds: 300 })}`;
      const ws = new WebSocket(url, [WATCH_PROTOCOL, BEARER_PROTOCOL + b64url(token())]);
      this.socket = ws;
      let opened = false;
      let expired = false;
      let failure = null;
      ws.onopen = () => {
        opened = true;
        if (this.error) { this.error = null; this.notify(); }
      };
      ws.onmessage = (msg) => {
        if (gen !== this.generation) { ws.close(); return; }
        let ev;
        try { ev = JSON.parse(msg.data); } catch (_e) { return; }
        if (ev.type === "ERROR") {
          const st = ev.object || {};
          if (st.code === 410) expired = true;
          else failure = new ApiError(st.code || 500, st);
          ws.close();
          return;
        }
        const obj = ev.object || {};
        const rv = obj.metadata && obj.metadata.resourceVersion;
        if (rv) this.rv = rv;
        if (ev.type === "BOOKMARK") return;
        const key = keyOf(obj);
        if (ev.type === "DELETED") this.items.delete(key);
        else this.items.set(key, obj);
        this.notify();
      };
      ws.onclose = (ev) => {
        if (this.socket === ws) this.socket = null;
        if (failure) reject(failure);
        else if (expired) resolve(true);
        else if (!opened || (ev.code !== 1000 && gen === this.generation)) {
          reject(new WatchBroken(opened ? `watch closed (${ev.code})` : "watch refused"));
        } else resolve(false);
      };
    });
  }
}

/** The shared informer of a collection URL (+ selectors). */
export function informer(path, query = {}) {
  const cacheKey = `${path}?${new URLSearchParams(query)}`;
  let inf = instances.get(cacheKey);
  if (!inf) {
    inf = new Informer(path, query);
    inf.cacheKey = cacheKey;
    instances.set(cacheKey, inf);
  }
  return inf;
}

/**
 * Subscribe `render` to several informers; it is called (coalesced) with
 * no arguments whenever any of them changes. Returns the unsubscribe.
 */
export function follow(informers, render) {
  let queued = false;
  const fire = () => {
    if (queued) return;
    queued = true;
    schedule(() => { queued = false; render(); });
  };
  const unsubs = informers.map((inf) => inf.subscribe(fire));
  fire();
  return () => unsubs.forEach((u) => u());
}

/** Forget every informer (logout). */
export function stopAll() {
  for (const inf of Array.from(instances.values())) inf.stop();
  instances.clear();
}

/** The shared informer of node-side collection `path` (of N) in cluster
 *  `clusterKey` ("ns/name"), through the cluster proxy. */
export function clusterInformer(clusterKey, path, query = {}) {
  const [ns, name] = clusterKey.split("/");
  return informer(inCluster(ns, name, path), query);
}

/**
 * Node-side collection `path` (of N) in every managed cluster: follows the
 * Clusters and keeps one shared informer per cluster (dropped when the
 * Cluster goes). Informer-like for follow() (subscribe, list, synced,
 * error); of("ns/name") is one cluster's informer. A cluster whose API does
 * not answer counts as synced (its informer says why in `error`), so one
 * unreachable cluster never keeps a page "Loading…".
 */
export class PerCluster {
  constructor(path, query = {}) {
    this.path = path;
    this.query = query;
    this.clusters = informer(R.clusters);
    this.parts = new Map(); // "ns/name" -> { inf, unsub }
    this.subs = new Set();
    this.unsubClusters = null;
  }

  subscribe(fn) {
    this.subs.add(fn);
    if (!this.unsubClusters) {
      this.unsubClusters = this.clusters.subscribe(() => { this.sync(); this.notify(); });
    } else schedule(() => fn(this));
    return () => {
      this.subs.delete(fn);
      if (this.subs.size) return;
      if (this.unsubClusters) { this.unsubClusters(); this.unsubClusters = null; }
      for (const part of this.parts.values()) part.unsub();
      this.parts.clear();
    };
  }

  sync() {
    const want = new Map(this.clusters.list().map((c) => [keyOf(c), c]));
    for (const [key, part] of Array.from(this.parts)) {
      if (!want.has(key)) { part.unsub(); this.parts.delete(key); }
    }
    for (const key of want.keys()) {
      if (this.parts.has(key)) continue;
      const inf = clusterInformer(key, this.path, this.query);
      this.parts.set(key, { inf, unsub: inf.subscribe(() => this.notify()) });
    }
  }

  notify() {
    for (const fn of Array.from(this.subs)) {
      try { fn(this); } catch (e) { console.error(e); }
    }
  }

  /** One cluster's informer ("ns/name"), or undefined while it is not followed. */
  of(clusterKey) {
    const part = this.parts.get(clusterKey);
    return part ? part.inf : undefined;
  }

  /** The objects of one cluster (none while it is not followed). */
  listIn(clusterKey) {
    const inf = this.of(clusterKey);
    return inf ? inf.list() : [];
  }

  /** Whether one cluster's objects are all known (or its API does not answer). */
  syncedIn(clusterKey) {
    const inf = this.of(clusterKey);
    return !!inf && (inf.synced || !!inf.error);
  }

  /** Every cluster's objects. */
  list() { return Array.from(this.parts.values()).flatMap((p) => p.inf.list()); }

  get synced() {
    return this.clusters.synced
      && Array.from(this.parts.values()).every((p) => p.inf.synced || !!p.inf.error);
  }

  get error() {
    const broken = Array.from(this.parts.entries()).filter(([, p]) => p.inf.error);
    return broken.length ? broken.map(([k, p]) => `${k}: ${p.inf.error}`).join("; ") : null;
  }
}
