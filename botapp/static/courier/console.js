// The console's own behaviour, loaded on every page (UNFOLD["SCRIPTS"]). The Content-Security-Policy
// (script-src 'self') runs no inline handler or script, so controls carry data attributes and
// classes, and this file listens for them on the document.
(function () {
  "use strict";

  // Copy buttons (a stored file's deep link): <button class="copy-link" data-link="...">.
  function copied(button) {
    button.textContent = "Copied";
    button.dataset.copied = "true";
  }

  function copyByRange(button) {
    // Without the Clipboard API (a page served over plain http elsewhere than localhost).
    const field = document.createElement("textarea");
    field.value = button.dataset.link;
    field.setAttribute("readonly", "");
    field.style.position = "fixed";
    field.style.opacity = "0";
    document.body.appendChild(field);
    field.select();
    const ok = document.execCommand("copy");
    document.body.removeChild(field);
    if (ok) {
      copied(button);
    } else {
      button.textContent = "Copy failed: select the link";
    }
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("button.copy-link");
    if (!button) {
      return;
    }
    event.preventDefault();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(button.dataset.link).then(
        function () { copied(button); },
        function () { copyByRange(button); }
      );
    } else {
      copyByRange(button);
    }
  });
})();
