/*
 * Warning Light live updates: the browser side of opsconsole/consumers.py.
 * No framework, no CDN. Include with
 *   <script src="{% static 'js/live.js' %}"></script>
 *
 * API
 *   var live = WL.live.connect(path, onMessage, options)
 *     path       "/ws/runs/<run id>/" or "/ws/projects/<slug>/"; build them with
 *                WL.live.runPath(runId) and WL.live.projectPath(slug) (a "/" in a run id is kept).
 *                A full ws:// or wss:// URL is used as given.
 *     onMessage  function (frame): each frame from the server, parsed. Frames (opsconsole/live.py):
 *                  {type: "points", run, receipt, min_step, max_step, last_step, attempt,
 *                   points, events, phases, series: [{metric, component}]}
 *                  {type: "alert", run, change, step, at, by, note, alert: {... as GET /api/v1/alerts/ ...}}
 *                      change: fired | extended | resolved | acknowledged | muted | verdict | unmuted
 *                  {type: "incident", run, change, changes, at, by, note, incident: {... as GET /api/v1/incidents/ ...}}
 *                      change: opened | joined | origin | state | acknowledged | verdict | muted
 *                  {type: "run", run, status, previous, last_step}
 *                  {type: "error", error}   (the server did not understand something sent)
 *                "pong" frames are handled here and not passed on.
 *     options    optional:
 *                  onState: function (state, detail) with state
 *                    "connecting"  detail {attempt}
 *                    "open"        detail {reconnected: bool}: after a reconnect, frames sent while the
 *                                  socket was down are lost; reload what the page shows (e.g. the points
 *                                  after the last step it has)
 *                    "closed"      detail {code, retryIn (ms)}: it will reconnect by itself
 *                    "refused"     detail {code}: 4401 not logged in, 4403 may not see this (anymore);
 *                                  it does not retry
 *                  minDelay (1000 ms), maxDelay (30000 ms): reconnect backoff, doubled per failed try, with jitter
 *                  pingEvery (25000 ms): a {type: "ping"} to keep proxies from closing an idle socket
 *   live.close()   stop for good (no reconnect)
 *   live.send(obj) send a JSON frame if open (returns true if sent); the server understands {type: "ping"} only
 *   live.state()   "connecting" | "open" | "closed" | "refused" | "stopped"
 */
(function (global) {
  "use strict";

  var REFUSED = { 4401: true, 4403: true };

  function socketUrl(path) {
    if (/^wss?:\/\//.test(path)) return path;
    var scheme = global.location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + global.location.host + path;
  }

  function runPath(runId) {
    return "/ws/runs/" + String(runId).split("/").map(encodeURIComponent).join("/") + "/";
  }

  function projectPath(slug) {
    return "/ws/projects/" + encodeURIComponent(slug) + "/";
  }

  function connect(path, onMessage, options) {
    options = options || {};
    var minDelay = options.minDelay || 1000;
    var maxDelay = options.maxDelay || 30000;
    var pingEvery = options.pingEvery || 25000;
    var onState = options.onState || function () {};
    var url = socketUrl(path);
    var ws = null;
    var state = "connecting";
    var attempt = 0;
    var everOpened = false;
    var retryTimer = null;
    var pingTimer = null;

    function setState(next, detail) {
      state = next;
      try { onState(next, detail || {}); } catch (err) { if (global.console) global.console.error(err); }
    }

    function stopPing() {
      if (pingTimer !== null) { global.clearInterval(pingTimer); pingTimer = null; }
    }

    function open() {
      retryTimer = null;
      attempt += 1;
      setState("connecting", { attempt: attempt });
      try {
        ws = new global.WebSocket(url);
      } catch (err) {
        scheduleRetry(0);
        return;
      }
      ws.onopen = function () {
        var reconnected = everOpened;
        everOpened = true;
        attempt = 0;
        stopPing();
        pingTimer = global.setInterval(function () { send({ type: "ping" }); }, pingEvery);
        setState("open", { reconnected: reconnected });
      };
      ws.onmessage = function (event) {
        var frame;
        try { frame = JSON.parse(event.data); } catch (err) { return; }
        if (!frame || frame.type === "pong") return;
        try { onMessage(frame); } catch (err) { if (global.console) global.console.error(err); }
      };
      ws.onclose = function (event) {
        stopPing();
        ws = null;
        if (state === "stopped") return;
        if (REFUSED[event.code]) {
          setState("refused", { code: event.code });
          return;
        }
        scheduleRetry(event.code);
      };
      // onerror is always followed by onclose, which decides what happens next.
    }

    function scheduleRetry(code) {
      var base = Math.min(maxDelay, minDelay * Math.pow(2, Math.max(0, attempt - 1)));
      var delay = Math.round(base / 2 + Math.random() * base / 2);
      setState("closed", { code: code, retryIn: delay });
      retryTimer = global.setTimeout(open, delay);
    }

    function send(obj) {
      if (ws === null || ws.readyState !== 1) return false;
      ws.send(JSON.stringify(obj));
      return true;
    }

    function close() {
      state = "stopped";
      stopPing();
      if (retryTimer !== null) { global.clearTimeout(retryTimer); retryTimer = null; }
      if (ws !== null) { ws.close(1000); ws = null; }
    }

    open();
    return { close: close, send: send, state: function () { return state; } };
  }

  global.WL = global.WL || {};
  global.WL.live = { connect: connect, runPath: runPath, projectPath: projectPath };
})(window);
