// The static build's service worker (attnlab lesson build-site writes it to the folder's root as
// sw.js, with FILES and VERSION filled in): after the first visit the lesson works offline.
//
// - install: every page, script, style sheet, font and lesson data file of the build (FILES) goes
//   into this version's cache, so any page opens offline once one page has been visited;
// - fetch: a file of the site is answered from the cache when it is there, else from the network
//   and kept (the runtime and the models, 10+ MB each, are kept when a widget first loads them
//   rather than on install, so a phone downloads only the models it uses);
// - activate: the caches of older builds are deleted (VERSION is a hash of the build's files, so a
//   new build is a new service worker and a new cache).
// Only GET and HEAD requests inside the site's own folder are touched; the explorer never registers this.
"use strict";

const VERSION = "__VERSION__";
const FILES = [/* FILES */];
const CACHE = "attnlab-site-" + VERSION;
const SCOPE = self.registration.scope; // the folder sw.js is in, ending in "/"

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    await cache.addAll(FILES.map((f) => new URL(f, SCOPE).href));
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key.startsWith("attnlab-site-") && key !== CACHE) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

// A page's address as the build wrote it: lesson/3 (a host's "pretty" address) → lesson/3.html,
// a folder → its index.html; the address's ?lang=… and #… do not name another file.
function pageFile(url) {
  const u = new URL(url);
  u.search = "";
  u.hash = "";
  if (u.pathname.endsWith("/")) u.pathname += "index.html";
  else if (!/\.[a-z0-9]+$/i.test(u.pathname)) u.pathname += ".html";
  return u.href;
}

async function answer(request) {
  const cache = await caches.open(CACHE);
  const page = request.mode === "navigate";
  const hit = (await cache.match(request, { ignoreSearch: page })) || (page && (await cache.match(pageFile(request.url))));
  if (hit) return hit;
  const response = await fetch(request);
  if (response.status === 200 && !request.headers.has("range")) {
    await cache.put(page ? pageFile(request.url) : request, response.clone()).catch(() => {});
  }
  return response;
}

// A HEAD request (the engine asks a model file's size first, for its progress line) is answered
// from the cached file's headers when there is one, so it does not fail offline.
async function head(request) {
  const cache = await caches.open(CACHE);
  const hit = await cache.match(request.url);
  if (!hit) return fetch(request);
  const headers = new Headers(hit.headers);
  if (!headers.has("content-length")) headers.set("content-length", String((await hit.clone().arrayBuffer()).byteLength));
  return new Response(null, { status: hit.status, headers });
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (!request.url.startsWith(SCOPE)) return;
  if (request.method === "GET") event.respondWith(answer(request));
  else if (request.method === "HEAD") event.respondWith(head(request));
});
