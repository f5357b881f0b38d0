/* The inbox's incidents: a row per incident, its alerts' rows below it hidden until it is expanded.
 *
 *   <tr class="incident-row"> … <button class="incident-toggle" data-incident-id="N" aria-expanded="false"> …
 *   <tr class="incident-member" data-incident="N" hidden> (one per alert of it on this page)
 *
 * Clicks are handled on the document, so the rows live-table.js swaps in keep working, and the incidents
 * someone expanded stay expanded after a swap. No inline script: the Content-Security-Policy allows none.
 */
(function () {
  "use strict";
  const expanded = new Set();
  function show(id, open) {
    for (const row of document.querySelectorAll(`tr.incident-member[data-incident="${id}"]`)) row.hidden = !open;
    for (const button of document.querySelectorAll(`button.incident-toggle[data-incident-id="${id}"]`)) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
      button.textContent = button.textContent.replace(/^[▸▾]/, open ? "▾" : "▸");
    }
  }
  document.addEventListener("click", function (event) {
    const button = event.target.closest("button.incident-toggle");
    if (!button) return;
    const id = button.dataset.incidentId;
    const open = button.getAttribute("aria-expanded") !== "true";
    if (open) expanded.add(id); else expanded.delete(id);
    show(id, open);
  });
  // Rendered open by the server (a refused form inside): remembered as expanded.
  for (const button of document.querySelectorAll('button.incident-toggle[aria-expanded="true"]')) expanded.add(button.dataset.incidentId);
  const live = document.getElementById("inbox-live");
  if (live && window.MutationObserver) {
    new MutationObserver(function () { for (const id of expanded) show(id, true); }).observe(live, { childList: true });
  }
})();
