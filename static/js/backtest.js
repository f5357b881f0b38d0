/* A backtest still queued or running: its page (data-poll) is fetched every second or so and this element is swapped
 * for the fresh one, until the fresh one has no data-poll (done, cut or failed). No inline script (the
 * Content-Security-Policy allows scripts from 'self' only). */
(function () {
  "use strict";
  const EVERY_MS = 1000;
  function poll() {
    const box = document.getElementById("backtest-result");
    if (!box || !box.dataset.poll) return;
    fetch(box.dataset.poll, {credentials: "same-origin", headers: {Accept: "text/html"}})
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
      .then((html) => {
        const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("backtest-result");
        if (fresh) box.replaceWith(document.importNode(fresh, true));
        setTimeout(poll, EVERY_MS);
      })
      .catch(() => setTimeout(poll, EVERY_MS * 5)); // a server restarting: try again, less often
  }
  setTimeout(poll, EVERY_MS);
})();
