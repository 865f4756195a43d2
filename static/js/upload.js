// Upload several trace files, one XHR each and one after another (each row is listed at
// once, queued until its turn), with a progress bar per file. A file goes in one XHR with
// its companions, grouped by the formats' own rules given as data in the page
// (#companion-rules): an AHD sidecar (*.replay.json) with the other files of the drop that
// are not traces (its token and brief, or an archive of them); a Paxman artifact x.json with
// x.contract.json; a ContextOS trace (*.contextos.json) with the pinned pack and KG snapshot
// (*.pack.json, *.kg.json); a MACE log with the snapshot files its fields name (read from
// the file before it is sent). No format is named here.
// Without JavaScript the same form posts all files at once and the page lists the outcomes.
(function () {
  "use strict";
  const form = document.getElementById("upload-form");
  if (!form) return;
  const input = document.getElementById("upload-input");
  const zone = document.getElementById("dropzone");
  const list = document.getElementById("upload-progress");
  const csrf = document.body.dataset.csrfToken;
  const limit = Number(form.dataset.limitBytes || "0");

  function outcomeFrom(html) {
    const t = document.createElement("template");
    t.innerHTML = html;
    return t.content.querySelector(".upload-outcome") || t.content.querySelector(".error");
  }

  function refuse(li, text) {
    const p = document.createElement("p");
    p.className = "refusal";
    p.setAttribute("role", "alert");
    p.textContent = text;
    li.querySelector(".result").replaceChildren(p);
    li.classList.add("failed");
  }

  // one upload at a time, in the order the files were given: the server stores each in its
  // own transaction, and a drop made while others are still sending waits its turn
  let queue = Promise.resolve();

  function send(file, companions) {
    const li = document.createElement("li");
    li.className = "upload-file";
    const name = document.createElement("span");
    name.className = "filename";
    name.textContent = file.name + (companions.length ? " (with " + companions.map(function (f) { return f.name; }).join(", ") + ")" : "");
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", "upload progress of " + file.name);
    const status = document.createElement("span");
    status.className = "status";
    const result = document.createElement("div");
    result.className = "result";
    li.append(name, bar, status, result);
    list.append(li);
    if (limit && [file].concat(companions).some(function (f) { return f.size > limit; })) {
      bar.value = 100;
      refuse(li, "Refused: UPLOAD_TOO_LARGE The file is larger than the limit of " + limit + " bytes.");
      return;
    }
    status.textContent = "queued";
    queue = queue.then(function () {
      return new Promise(function (done) {
        upload(file, companions, bar, status, result, li, done);
      });
    });
  }

  function upload(file, companions, bar, status, result, li, done) {
    status.textContent = "";
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("X-CSRFToken", csrf);
    xhr.setRequestHeader("HX-Request", "true");
    xhr.upload.addEventListener("progress", function (e) {
      if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
    });
    // every byte is sent: the server now verifies the file before it answers
    xhr.upload.addEventListener("load", function () {
      bar.value = 100;
      li.classList.add("verifying");
      status.textContent = "verifying…";
    });
    xhr.addEventListener("loadend", function () {
      li.classList.remove("verifying");
      status.textContent = "";
      done();
    });
    xhr.addEventListener("load", function () {
      bar.value = 100;
      const outcome = outcomeFrom(xhr.responseText);
      if (outcome) {
        // the row already names the file: the answer's own heading would name it twice
        const heading = outcome.querySelector(".filename");
        if (heading) heading.remove();
        result.replaceChildren(outcome);
        li.classList.add(outcome.classList.contains("accepted") ? "done" : "failed");
      } else {
        refuse(li, "Refused: HTTP " + xhr.status + " " + xhr.statusText);
      }
    });
    xhr.addEventListener("error", function () {
      refuse(li, "The upload failed (network error). Try again.");
    });
    const data = new FormData();
    data.append("files", file, file.name);
    for (const other of companions) data.append("files", other, other.name);
    xhr.send(data);
  }

  // which files of one drop go together: each format's companion rules, as data from the
  // server's format registry ({format, trace, companion, role, needs_owner, named_by,
  // max_bytes}; see core.formats.protocol.CompanionRule). A rule by name: a file whose name
  // matches `trace` takes every other file of the drop whose name matches `companion`
  // (`{stem}`: the file's name without its `trace` match). A rule by content (`named_by`): a
  // file whose name matches `trace`, of at most `max_bytes`, that is a JSON object takes the
  // files named exactly `companion` with `{named}` replaced by each of those fields' string
  // values (unless that file names files itself). A companion is not sent on its own.
  const rulesNode = document.getElementById("companion-rules");
  const rules = rulesNode ? JSON.parse(rulesNode.textContent) : [];
  const byName = rules.filter(function (rule) { return !rule.named_by; });
  const byContent = rules.filter(function (rule) { return rule.named_by; });

  function escaped(text) {
    return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }

  function companionsOf(file, all) {
    const found = [];
    for (const rule of byName) {
      const trace = new RegExp(rule.trace, "i");
      if (!trace.test(file.name)) continue;
      const stem = escaped(file.name.replace(trace, ""));
      const companion = new RegExp(rule.companion.split("{stem}").join(stem), "i");
      for (const other of all) {
        if (other !== file && companion.test(other.name) && found.indexOf(other) === -1) {
          found.push(other);
        }
      }
    }
    return found;
  }

  // the names of the files `file` names by the rules by content (a promise; [] for a file
  // no such rule reads, or one that is not a JSON object)
  function namedBy(file) {
    const reading = byContent.filter(function (rule) {
      return new RegExp(rule.trace, "i").test(file.name) && file.size <= rule.max_bytes;
    });
    if (!reading.length) return Promise.resolve([]);
    return file.text().then(function (text) {
      let doc = null;
      try { doc = JSON.parse(text); } catch (e) { return []; }
      if (!doc || typeof doc !== "object" || Array.isArray(doc)) return [];
      const names = [];
      for (const rule of reading) {
        for (const field of rule.named_by) {
          const value = doc[field];
          if (typeof value === "string" && value) names.push(rule.companion.split("{named}").join(value));
        }
      }
      return names;
    }, function () { return []; });
  }

  function sendAll(files) {
    const all = Array.from(files);
    Promise.all(all.map(namedBy)).then(function (named) {
      const groups = all.map(function (file, i) {
        const found = companionsOf(file, all);
        for (const name of named[i]) {
          const j = all.findIndex(function (other) { return other.name === name; });
          if (j !== -1 && j !== i && !named[j].length && found.indexOf(all[j]) === -1) found.push(all[j]);
        }
        return found;
      });
      const taken = [].concat.apply([], groups);
      all.forEach(function (file, i) {
        if (taken.indexOf(file) === -1) send(file, groups[i]);
      });
    });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    sendAll(input.files);
    input.value = "";
  });
  input.addEventListener("change", function () {
    sendAll(input.files);
    input.value = "";
  });
  zone.addEventListener("dragover", function (e) {
    e.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", function () {
    zone.classList.remove("dragging");
  });
  zone.addEventListener("drop", function (e) {
    e.preventDefault();
    zone.classList.remove("dragging");
    sendAll(e.dataTransfer.files);
  });
  form.classList.add("enhanced");
})();
