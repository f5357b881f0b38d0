/* Under the console's Content-Security-Policy (opsconsole/security.py) a <style> element may be
 * added only with the page's nonce. Plotly adds its own (its CSS rules, the map CSS it bundles)
 * from its script, so every <style> created on this page gets the nonce this script was loaded
 * with. Load it before the Plotly bundle:  <script nonce="{{ request.csp_nonce }}" src=".../csp-styles.js">
 */
(function () {
  "use strict";
  const nonce = document.currentScript && document.currentScript.nonce;
  if (!nonce) return;
  const create = document.createElement;
  document.createElement = function (tagName, options) {
    const element = create.call(document, tagName, options);
    if (String(tagName).toLowerCase() === "style") element.nonce = nonce;
    return element;
  };
})();
