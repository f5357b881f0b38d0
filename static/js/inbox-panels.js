/* The inbox's action panels (an alert's Verdict…, New normal…, Mute…; an incident's Verdict…, Mute…), filled in when opened.
 *
 *   <details data-panel="alert-verdict" data-pk="N" data-url="/inbox/alerts/N/verdict/?…" data-rule="…"
 *            data-component="…" data-project="…" data-max="…"> <summary>…</summary> <p class="lazy-panel">link</p>
 *   <template id="panel-alert-verdict"> the form, with __PK__, __URL__, __RULE__, … for the row's values </template>
 *
 * The page carries each form once instead of once a row. Without JavaScript the row's link opens the inbox with
 * that row's form rendered by the server. The row's values go in through the DOM (attributes and text), never
 * as HTML. Toggle events do not bubble: listened for while capturing, so rows live-table.js swaps in work too.
 */
(function () {
  "use strict";
  const MARKS = ["__PK__", "__URL__", "__RULE__", "__COMPONENT__", "__PROJECT__", "__MAX__", "__COUNT__"];

  function fill(text, values) {
    for (const mark of MARKS) if (text.includes(mark)) text = text.split(mark).join(values[mark]);
    return text;
  }

  function build(details) {
    const template = document.getElementById("panel-" + details.dataset.panel);
    if (!template) return;
    const d = details.dataset;
    const values = { __PK__: d.pk, __URL__: d.url, __RULE__: d.rule || "", __COMPONENT__: d.component || "the run",
                     __PROJECT__: d.project || "", __MAX__: d.max || "", __COUNT__: d.count || "" };
    const panel = template.content.cloneNode(true);
    const walker = document.createTreeWalker(panel, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.nodeType === Node.TEXT_NODE) {
        node.data = fill(node.data, values);
      } else {
        for (const attribute of Array.from(node.attributes)) attribute.value = fill(attribute.value, values);
      }
    }
    if (d.panel.startsWith("alert-") && !d.component) {
      // A whole-run alert has no component to mute: its scope list starts at the run.
      const option = panel.querySelector('select[name="scope"] option[value="component"]');
      if (option) {
        option.remove();
        panel.querySelector('select[name="scope"] option[value="run"]').selected = true;
      }
    }
    const lazy = details.querySelector(".lazy-panel");
    if (lazy) lazy.remove();
    details.appendChild(panel);
    details.dataset.built = "true";
  }

  document.addEventListener("toggle", function (event) {
    const details = event.target;
    if (details.tagName === "DETAILS" && details.open && details.dataset.panel && !details.dataset.built) build(details);
  }, true);
})();
