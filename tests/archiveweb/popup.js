// TRACE's stand-in for ArchiveWeb.page's popup (the project's own is part of its web app, which its npm
// package does not publish): it speaks to the background over the same port and messages. JavaScript
// because it runs in the extension's page, where the benchmark calls its two functions through DevTools.

// Starts recording the tab `tabId` into the default collection (made on first use) and resolves, with the
// collection's id, once the background says it records; as the real popup does, without behaviours.
window.startRecording = (tabId) =>
  new Promise((resolve, reject) => {
    const port = chrome.runtime.connect({ name: "popup-port" });
    let collId = null;
    port.onMessage.addListener((message) => {
      if (message.type === "collections" && collId === null) {
        collId = message.collId;
        port.postMessage({ type: "startRecording", collId, autorun: false });
      } else if (message.type === "status" && message.recording) {
        resolve(collId);
      }
    });
    port.onDisconnect.addListener(() => reject(new Error("the background closed the popup's port")));
    port.postMessage({ type: "startUpdates", tabId });
  });

// What every collection holds, read from the recorder's IndexedDB: the number of resources and pages, each
// resource's URL, and, for the resources whose URL contains `bodyUrlPart`, the length of the body kept (as
// the stored response's Content-Length gives it, which the recorder sets to the body it read).
window.recorded = async (bodyUrlPart) => {
  const colls = await readAll("collDB", "colls");
  const result = { resources: 0, pages: 0, urls: [], bodyLengths: [] };
  for (const coll of colls) {
    const dbname = coll.config.dbname;
    await forEach(dbname, "resources", (resource) => {
      result.resources += 1;
      result.urls.push(resource.url);
      if (bodyUrlPart && resource.url.includes(bodyUrlPart)) {
        const headers = resource.respHeaders || {};
        const length = headers["content-length"] ?? headers["Content-Length"];
        result.bodyLengths.push(Number(length ?? 0));
      }
    });
    result.pages += (await readAll(dbname, "pages")).length;
  }
  return result;
};

function open(name) {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(name);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function readAll(dbname, store) {
  const db = await open(dbname);
  try {
    return await new Promise((resolve, reject) => {
      const request = db.transaction(store).objectStore(store).getAll();
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

async function forEach(dbname, store, visit) {
  const db = await open(dbname);
  try {
    await new Promise((resolve, reject) => {
      const request = db.transaction(store).objectStore(store).openCursor();
      request.onsuccess = () => {
        const cursor = request.result;
        if (!cursor) return resolve();
        visit(cursor.value);
        cursor.continue();
      };
      request.onerror = () => reject(request.error);
    });
  } finally {
    db.close();
  }
}

document.getElementById("start").addEventListener("click", async () => {
  const status = document.getElementById("status");
  try {
    const collId = await window.startRecording(Number(document.getElementById("tab").value));
    status.textContent = `Recording into ${collId}`;
  } catch (error) {
    status.textContent = String(error);
  }
});
