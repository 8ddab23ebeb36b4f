// A site's storage in the browser, read in its pages by the recorder and put back in a replay's. JavaScript
// because it runs inside pages: DevTools can list IndexedDB but gives its values back as previews, not as
// what the page stored. Both sides evaluate this same file, so that what one encodes the other decodes.
//
// Values are encoded as JSON, with what JSON cannot hold (a Date, binary data, a Blob, a Map, NaN, ...)
// as an object tagged `$trace`; a stored object that has a `$trace` key of its own is wrapped, so that
// nothing the page stored reads back as a tag. Records that refer to themselves are left out (counted).
(() => {
  const TAG = "$trace";
  const kindOf = (value) => Object.prototype.toString.call(value).slice(8, -1);
  const base64 = (bytes) => {
    let text = "";
    for (let at = 0; at < bytes.length; at += 0x8000) text += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
    return btoa(text);
  };
  const bytesOf = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

  // `pending` collects the reading of Blobs, which only an asynchronous call gives.
  const encode = (value, pending, seen = new Set()) => {
    switch (typeof value) {
      case "string":
      case "boolean":
        return value;
      case "number":
        if (Number.isFinite(value) && !Object.is(value, -0)) return value;
        return { [TAG]: "number", v: Object.is(value, -0) ? "-0" : String(value) };
      case "bigint":
        return { [TAG]: "bigint", v: String(value) };
      case "undefined":
        return { [TAG]: "undefined" };
    }
    if (value === null) return null;
    if (seen.has(value)) throw new Error("a value that contains itself");
    seen.add(value);
    try {
      return encodeObject(value, pending, seen);
    } finally {
      seen.delete(value);
    }
  };
  const encodeObject = (value, pending, seen) => {
    const each = (item) => encode(item, pending, seen);
    if (Array.isArray(value)) return Array.from(value, each);
    if (ArrayBuffer.isView(value)) {
      const bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
      return { [TAG]: "view", type: kindOf(value), v: base64(bytes) };
    }
    switch (kindOf(value)) {
      case "Date":
        return { [TAG]: "date", v: each(value.getTime()) };
      case "RegExp":
        return { [TAG]: "regexp", source: value.source, flags: value.flags };
      case "ArrayBuffer":
        return { [TAG]: "arraybuffer", v: base64(new Uint8Array(value)) };
      case "Blob":
      case "File": {
        const out = { [TAG]: "blob", type: value.type, v: "" };
        if (kindOf(value) === "File") Object.assign(out, { name: value.name, lastModified: value.lastModified });
        pending.push(value.arrayBuffer().then((buffer) => (out.v = base64(new Uint8Array(buffer)))));
        return out;
      }
      case "Map":
        return { [TAG]: "map", v: Array.from(value, ([key, item]) => [each(key), each(item)]) };
      case "Set":
        return { [TAG]: "set", v: Array.from(value, each) };
      case "Error":
        return { [TAG]: "error", name: value.name, message: value.message };
      case "Boolean":
      case "Number":
      case "String":
        return { [TAG]: "boxed", v: each(value.valueOf()) };
    }
    const out = {};
    for (const [key, item] of Object.entries(value)) out[key] = each(item);
    return TAG in out ? { [TAG]: "object", v: out } : out;
  };

  const decodeEntries = (object) => Object.fromEntries(Object.entries(object).map(([k, v]) => [k, decode(v)]));
  const decode = (value) => {
    if (Array.isArray(value)) return value.map(decode);
    if (value === null || typeof value !== "object") return value;
    switch (value[TAG]) {
      case undefined:
        return decodeEntries(value);
      case "number":
        return Number(value.v);
      case "bigint":
        return BigInt(value.v);
      case "undefined":
        return undefined;
      case "date":
        return new Date(decode(value.v));
      case "regexp":
        return new RegExp(value.source, value.flags);
      case "arraybuffer":
        return bytesOf(value.v).buffer;
      case "view": {
        const View = globalThis[value.type];
        const buffer = bytesOf(value.v).buffer;
        return View === DataView || View?.prototype instanceof Object.getPrototypeOf(Uint8Array)
          ? new View(buffer)
          : new Uint8Array(buffer);
      }
      case "blob":
        return "name" in value
          ? new File([bytesOf(value.v)], value.name, { type: value.type, lastModified: value.lastModified })
          : new Blob([bytesOf(value.v)], { type: value.type });
      case "map":
        return new Map(value.v.map(([key, item]) => [decode(key), decode(item)]));
      case "set":
        return new Set(value.v.map(decode));
      case "error": {
        const Kind = globalThis[value.name];
        const error = Kind === Error || Kind?.prototype instanceof Error ? new Kind(value.message) : new Error(value.message);
        return error;
      }
      case "boxed":
        return Object(decode(value.v));
      case "object":
        return decodeEntries(value.v);
    }
    return decodeEntries(value);
  };

  const done = (request) =>
    new Promise((resolve, reject) => {
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });

  // Opens a database that exists, never creating one (it may have been deleted since it was listed), and
  // gives way at once to the page's own upgrade of it.
  const openExisting = (name) =>
    new Promise((resolve, reject) => {
      const request = indexedDB.open(name);
      request.onupgradeneeded = () => request.transaction.abort();
      request.onsuccess = () => {
        request.result.onversionchange = () => request.result.close();
        resolve(request.result);
      };
      request.onerror = () => reject(request.error);
    });

  const copyWebStorage = () => {
    const copy = (area) => {
      const entries = {};
      for (let i = 0; i < area.length; i++) entries[area.key(i)] = area.getItem(area.key(i));
      return entries;
    };
    try {
      return { local: copy(localStorage), session: copy(sessionStorage) };
    } catch {
      return null; // An opaque origin, or storage refused to this document.
    }
  };

  // Every database of the page's origin, whole, as long as the encoded records stay under `limitBytes`.
  const readDatabases = async (limitBytes) => {
    const databases = [];
    let recordsLeftOut = 0;
    let size = 0;
    for (const { name } of await indexedDB.databases()) {
      let db;
      try {
        db = await openExisting(name);
      } catch {
        continue;
      }
      try {
        const names = [...db.objectStoreNames];
        const transaction = names.length ? db.transaction(names, "readonly") : null;
        // Each store described and every read asked at once, while the transaction is active: it ends
        // when it has nothing left to do.
        const described = names.map((storeName) => {
          const store = transaction.objectStore(storeName);
          const indexes = [...store.indexNames].map((indexName) => {
            const index = store.index(indexName);
            return { name: indexName, key_path: index.keyPath, unique: index.unique, multi_entry: index.multiEntry };
          });
          const read = Promise.all([done(store.getAllKeys()), done(store.getAll())]);
          return { store: { name: storeName, key_path: store.keyPath, auto_increment: store.autoIncrement, indexes }, read };
        });
        const contents = await Promise.all(described.map(({ read }) => read));
        const stores = described.map(({ store }, at) => {
          const [keys, values] = contents[at];
          const records = [];
          for (let i = 0; i < keys.length; i++) {
            const pending = [];
            try {
              const record = { key: encode(keys[i], pending), value: encode(values[i], pending) };
              const recordSize = JSON.stringify(record).length;
              if (size + recordSize > limitBytes) throw new Error("over the limit");
              size += recordSize;
              records.push(Promise.all(pending).then(() => record));
            } catch {
              recordsLeftOut++;
            }
          }
          return { ...store, records };
        });
        for (const store of stores) store.records = await Promise.all(store.records);
        databases.push({ name, version: db.version, object_stores: stores });
      } catch {
        // The page upgraded or deleted the database while it was read: it is left out, as the log says.
        recordsLeftOut++;
      } finally {
        db.close();
      }
    }
    return { databases, records_left_out: recordsLeftOut };
  };

  // Creates each database at its recorded version with its stores, indexes and records, in the upgrade
  // itself: the page's own opening of it waits until that is done. A database that already exists (put
  // back earlier in this browser, or made by the page) is left as it is.
  const restoreDatabases = async (databases) => {
    let restored = 0;
    for (const database of databases) {
      const db = await new Promise((resolve, reject) => {
        const request = indexedDB.open(database.name, database.version);
        request.onupgradeneeded = (event) => {
          if (event.oldVersion !== 0) return;
          const db = request.result;
          for (const recorded of database.object_stores) {
            const store = db.createObjectStore(recorded.name, {
              keyPath: recorded.key_path ?? null,
              autoIncrement: recorded.auto_increment,
            });
            for (const index of recorded.indexes) {
              store.createIndex(index.name, index.key_path, { unique: index.unique, multiEntry: index.multi_entry });
            }
            for (const record of recorded.records) {
              try {
                if (recorded.key_path == null) store.put(decode(record.value), decode(record.key));
                else store.put(decode(record.value));
              } catch {
                // A record this browser refuses (a key it cannot take) does not cost the others.
              }
            }
          }
          restored++;
        };
        request.onsuccess = () => resolve(request.result);
        // Already at a later version: the page has made it its own.
        request.onerror = () => (request.error?.name === "VersionError" ? resolve(null) : reject(request.error));
      });
      db?.close();
    }
    return restored;
  };

  // The origin's storage: its web storage as the document found it when `atStart` (copied by
  // `copyWebStorage` at the document's start, see `site_storage.rs`) or as it is now, and its databases.
  const read = async (limitBytes, atStart) => {
    const web = (atStart && globalThis.__traceStorageAtStart) || copyWebStorage() || {};
    const { databases, records_left_out } = await readDatabases(limitBytes).catch(() => ({
      databases: [],
      records_left_out: 0,
    }));
    return { origin: location.origin, ...web, indexed_db: databases, records_left_out };
  };

  return { copyWebStorage, read, restoreDatabases, encode, decode };
})()
