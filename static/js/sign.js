// In-browser Ed25519 signing (WebCrypto). The private key is generated non-extractable and
// kept in this browser's IndexedDB; only its public key is ever sent to the server.
// Without JavaScript (or WebCrypto) the pages offer the offline `governance sign` path.
(function () {
  "use strict";
  const DB = "replay-audit-console";
  const STORE = "signing-keys";

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function openDb() {
    return new Promise(function (resolve, reject) {
      const request = indexedDB.open(DB, 1);
      request.onupgradeneeded = function () {
        request.result.createObjectStore(STORE);
      };
      request.onsuccess = function () { resolve(request.result); };
      request.onerror = function () { reject(request.error); };
    });
  }

  async function stored(signer) {
    const db = await openDb();
    return new Promise(function (resolve, reject) {
      const get = db.transaction(STORE, "readonly").objectStore(STORE).get(signer);
      get.onsuccess = function () { resolve(get.result || null); };
      get.onerror = function () { reject(get.error); };
    });
  }

  async function keep(signer, record) {
    const db = await openDb();
    return new Promise(function (resolve, reject) {
      const tx = db.transaction(STORE, "readwrite");
      tx.objectStore(STORE).put(record, signer);
      tx.oncomplete = function () { resolve(); };
      tx.onerror = function () { reject(tx.error); };
    });
  }

  function supported() {
    return window.crypto && crypto.subtle && window.indexedDB;
  }

  // --- the Keys page: generate and register -------------------------------------------------
  const registerForm = document.getElementById("key-register-form");
  const generate = document.getElementById("generate-key");
  if (registerForm && generate && supported()) {
    const status = document.getElementById("key-status");
    generate.parentElement.classList.remove("hidden");
    generate.addEventListener("click", async function () {
      const signer = registerForm.dataset.signer;
      try {
        const existing = await stored(signer);
        if (existing && !confirm("This browser already holds a key for " + signer + ". Replace it?")) return;
        const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
        const publicHex = hex(await crypto.subtle.exportKey("raw", pair.publicKey));
        await keep(signer, { privateKey: pair.privateKey, publicKey: pair.publicKey, publicHex: publicHex });
        registerForm.querySelector("[name=public_key]").value = publicHex;
        const label = registerForm.querySelector("[name=label]");
        if (!label.value.trim()) label.value = "made in this browser on " + new Date().toISOString().slice(0, 10);
        status.textContent = "Key generated; registering…";
        registerForm.submit();
      } catch (err) {
        status.textContent = "This browser cannot make an Ed25519 key (" + err + "). Use the offline command instead.";
      }
    });
  }

  // --- approval and halt pages: sign the exact payload shown --------------------------------
  // The payload region is replaced by htmx whenever the decision, role or reason changes, and
  // htmx "settles" a swapped element by giving it the old element's attributes for a moment and
  // then its own again: state kept on the form or the button (a "wired" flag, a removed
  // "hidden" class) does not survive that. So nothing is kept on them: the <html> element says
  // this browser can sign (the CSS shows the button), and one listener on the document handles
  // the submit of whichever signing form is there, reading its payload at that moment.

  // The choice (decision, role, reason) the payload shown does not carry yet, if any: a reason
  // typed and the sign button clicked at once sends the refresh of the payload only as the
  // field loses focus, after this click; signing then would sign the payload without it.
  function staleChoice(payloadText) {
    const choices = document.querySelector("form[data-payload-choices]");
    if (!choices) return null;
    let payload;
    try {
      payload = JSON.parse(payloadText);
    } catch (err) {
      return null;
    }
    for (const field of Array.from(choices.elements)) {
      if (!field.name || !(field.name in payload)) continue;
      if ((field.type === "radio" || field.type === "checkbox") && !field.checked) continue;
      if (String(payload[field.name]) !== field.value) return { choices: choices, name: field.name };
    }
    return null;
  }

  // The signing form on the page now. Signing awaits IndexedDB and WebCrypto, and meanwhile
  // htmx may swap in a new payload region (a "Show the payload" answer landing late): the form
  // the click came from is then detached, and submitting it or writing its status would do
  // nothing the signer can see.
  function currentForm(form) {
    return form.isConnected ? form : document.getElementById("sign-form");
  }

  function say(form, text) {
    const shown = currentForm(form) || form;
    shown.querySelector("[id=sign-status]").textContent = text;
  }

  async function signAndSubmit(form, event) {
    const pasted = form.querySelector("[name=document]");
    if (event.submitter && event.submitter.name === "offline" && pasted && pasted.value.trim()) return;
    event.preventDefault();
    const payload = form.querySelector("[name=payload]").value;
    const stale = staleChoice(payload);
    if (stale) {
      say(form, "The payload above does not carry your " + stale.name + " yet; it is being updated: read it and sign again.");
      if (window.htmx) window.htmx.trigger(stale.choices, "change");
      return;
    }
    try {
      const record = await stored(form.dataset.signer);
      if (!record) {
        say(form, "This browser holds no signing key for you: generate and register one on the Keys page.");
        return;
      }
      const held = (f) => Array.from(f.querySelector("[name=key_id]").options).find((o) => o.dataset.publicKey === record.publicHex);
      if (!held(form)) {
        say(form, "The key in this browser is not registered and confirmed for you yet.");
        return;
      }
      const signature = await crypto.subtle.sign({ name: "Ed25519" }, record.privateKey, new TextEncoder().encode(payload));
      // Submit the form shown now, and only if it still asks for exactly what was signed.
      const target = currentForm(form);
      if (!target || target.querySelector("[name=payload]").value !== payload || !held(target)) {
        say(form, "The payload shown changed while this browser was signing it; nothing was submitted: read it and sign again.");
        return;
      }
      target.querySelector("[name=key_id]").value = held(target).value;
      target.querySelector("[name=signature]").value = hex(signature);
      say(target, "Signed; submitting…");
      target.submit();
    } catch (err) {
      say(form, "Signing failed: " + err);
    }
  }

  // --- the key this browser holds: marked where keys are listed, chosen in the signing form ---
  // Progressive: without JavaScript the lists are the same, unmarked, and the form's first key
  // is chosen (sign.js picks the right one at submit time anyway).
  async function markHeldKey() {
    const holder = document.querySelector("[data-key-holder]");
    const signer = holder ? holder.dataset.keyHolder : null;
    if (!signer) return;
    let record;
    try {
      record = await stored(signer);
    } catch (err) {
      return;
    }
    if (!record) return;
    document.querySelectorAll("[data-public-key]").forEach(function (element) {
      if (element.dataset.publicKey !== record.publicHex || element.dataset.held) return;
      element.dataset.held = "1";
      if (element instanceof HTMLOptionElement) {
        element.textContent += " — held by this browser";
        element.parentElement.value = element.value;
        return;
      }
      element.classList.add("held-here");
      const badge = document.createElement("span");
      badge.className = "badge held";
      badge.textContent = "held by this browser";
      (element.querySelector("td") || element).append(" ", badge);
    });
  }

  if (supported()) {
    markHeldKey();
    document.body.addEventListener("htmx:afterSettle", markHeldKey);
    document.documentElement.classList.add("can-sign");
    document.addEventListener("submit", function (event) {
      const form = event.target;
      if (form instanceof HTMLFormElement && form.id === "sign-form") signAndSubmit(form, event);
    });
  }
})();
