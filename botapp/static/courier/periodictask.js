// A schedule's form (celery-beat's PeriodicTask): the chosen crontab in words under its field, as
// celery-beat's own template does with an inline script, which the Content-Security-Policy blocks.
(function () {
  "use strict";
  const data = document.getElementById("readable-crontabs");
  const select = document.getElementById("id_crontab");
  if (!data || !select) {
    return;
  }
  const readable = JSON.parse(data.textContent);
  const field = select.closest(".field-crontab") || select.parentElement;
  const note = document.createElement("div");
  note.className = "help crontab-in-words";
  field.appendChild(note);
  const show = function () {
    note.textContent = readable[select.value] ? "In words: " + readable[select.value] : "";
  };
  select.addEventListener("change", show);
  show();
  const translation = document.querySelector(".field-crontab_translation");
  if (translation) {
    translation.hidden = true;
  }
})();
