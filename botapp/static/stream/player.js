// The player page's one script (served from this origin: the page's CSP allows no other, and no
// inline script). "Copy link" puts the page's address on the clipboard.
document.addEventListener("DOMContentLoaded", () => {
  const copy = document.getElementById("copy");
  const copied = document.getElementById("copied");
  if (!copy) return;
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(copy.dataset.link);
      copied.textContent = "Copied";
    } catch (error) {
      // No clipboard (an http page, or permission refused): show the link to copy by hand.
      copied.textContent = copy.dataset.link;
    }
    copied.hidden = false;
  });
});
