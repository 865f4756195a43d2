// "Copy JSON": fetches the document named by data-copy-url and puts it on the clipboard.
(function () {
  "use strict";
  for (const button of document.querySelectorAll("[data-copy-url]")) {
    button.classList.remove("hidden");
    button.addEventListener("click", async function () {
      const status = document.getElementById("copy-status");
      try {
        const response = await fetch(button.dataset.copyUrl, { credentials: "same-origin" });
        await navigator.clipboard.writeText(await response.text());
        if (status) status.textContent = "Copied.";
      } catch (err) {
        if (status) status.textContent = "Copy failed (" + err + "): use Download instead.";
      }
    });
  }
})();
