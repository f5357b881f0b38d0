/* The rule form: only the chosen kind's settings (and inputs marked data-kinds for some kinds only) are shown.
 * Without this script every kind's settings are on the page under their own heading, and the server reads only
 * the chosen kind's, so the form works the same. No inline script (the Content-Security-Policy). */
(function () {
  "use strict";
  const kind = document.getElementById("id_kind");
  if (!kind) return;
  function show() {
    for (const box of document.querySelectorAll(".rule-form [data-kind]")) {
      box.hidden = box.dataset.kind !== kind.value;
    }
    for (const box of document.querySelectorAll(".rule-form [data-kinds]")) {
      box.hidden = !box.dataset.kinds.split(" ").includes(kind.value) && !box.classList.contains("has-error")
        && !(box.querySelector("input") || {}).value;
    }
  }
  kind.addEventListener("change", show);
  show();
})();
