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

  // `blobs` collects the reading of Blobs, which only an asynchronous call gives, and counts their bytes.
  const encode = (value, blobs, seen = new Set()) => {
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
      return encodeObject(value, blobs, seen);
    } finally {
      seen.delete(value);
    }
  };
  const encodeObject = (value, blobs, seen) => {
    const each = (item) => encode(item, blobs, seen);
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
        blobs.reads.push(value.arrayBuffer().then((buffer) => (out.v = base64(new Uint8Array(buffer)))));
        blobs.bytes += Math.ceil(value.size / 3) * 4;
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
    // A platform object (a CryptoKey, a file handle, an ImageData) has no JSON form: kept as `{}` it would
    // break the page that finds it, where its absence lets the page make another.
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== null && prototype !== Object.prototype) throw new Error(`a ${kindOf(value)} cannot be kept`);
    // Built as own properties, a `__proto__` key included (an assignment would set the prototype instead).
    const out = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, each(item)]));
    return Object.hasOwn(out, TAG) ? { [TAG]: "object", v: out } : out;
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

  // How many records one request reads: a store is read a page at a time, so that a large one stops at
  // the limit rather than being loaded whole.
  const PAGE = 256;
  const utf8 = new TextEncoder();

  // Every database of the page's origin, whole, as long as the encoded records stay under `limitBytes`
  // (UTF-8 bytes, Blobs counted as their base64). What is past it, or cannot be kept, is counted.
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
        // Read within one transaction, each request asked as the previous one answers: it stays active.
        const transaction = names.length ? db.transaction(names, "readonly") : null;
        const stores = [];
        for (const storeName of names) {
          const store = transaction.objectStore(storeName);
          const indexes = [...store.indexNames].map((indexName) => {
            const index = store.index(indexName);
            return { name: indexName, key_path: index.keyPath, unique: index.unique, multi_entry: index.multiEntry };
          });
          const records = [];
          let range = null;
          while (true) {
            if (size >= limitBytes) {
              recordsLeftOut += await done(store.count(range));
              break;
            }
            const [keys, values] = await Promise.all([
              done(store.getAllKeys(range, PAGE)),
              done(store.getAll(range, PAGE)),
            ]);
            for (let i = 0; i < keys.length; i++) {
              const blobs = { reads: [], bytes: 0 };
              try {
                const record = { key: encode(keys[i], blobs), value: encode(values[i], blobs) };
                const recordSize = utf8.encode(JSON.stringify(record)).length + blobs.bytes;
                if (size + recordSize > limitBytes) throw new Error("over the limit");
                size += recordSize;
                const unreadable = () => {
                  recordsLeftOut++;
                  return null;
                };
                records.push(Promise.all(blobs.reads).then(() => record, unreadable));
              } catch {
                recordsLeftOut++;
              }
            }
            if (keys.length < PAGE) break;
            range = IDBKeyRange.lowerBound(keys[keys.length - 1], true);
          }
          stores.push({ name: storeName, key_path: store.keyPath, auto_increment: store.autoIncrement, indexes, records });
        }
        for (const store of stores) store.records = (await Promise.all(store.records)).filter((r) => r !== null);
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
    const failed = [];
    for (const database of databases) {
      const db = await new Promise((resolve, reject) => {
        let created = false;
        const request = indexedDB.open(database.name, database.version);
        request.onupgradeneeded = (event) => {
          if (event.oldVersion !== 0) {
            // An older one of the page's own: left as it is, not upgraded to an empty recorded version.
            request.transaction.abort();
            return;
          }
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
              // A record this browser refuses (a key it cannot take, a unique index it breaks) does not cost
              // the others: neither its exception nor its failed request aborts the upgrade.
              try {
                const put =
                  recorded.key_path == null
                    ? store.put(decode(record.value), decode(record.key))
                    : store.put(decode(record.value));
                put.onerror = (event) => event.preventDefault();
              } catch {}
            }
          }
          created = true;
        };
        request.onsuccess = () => {
          if (created) restored++;
          resolve(request.result);
        };
        // Already there at a later version (the page has made it its own), or left as it was (above).
        request.onerror = () =>
          ["VersionError", "AbortError"].includes(request.error?.name) ? resolve(null) : reject(request.error);
      }).catch((error) => {
        failed.push(`${database.name}: ${error}`);
        return null;
      });
      db?.close();
    }
    if (failed.length) throw new Error(`databases not put back (${failed.join("; ")}); ${restored} were`);
    return restored;
  };

  // The origin's storage: its web storage as the document found it when `atStart` (copied by
  // `copyWebStorage` at the document's start, see `storage.rs`) or as it is now, and its databases.
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
