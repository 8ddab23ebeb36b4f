// "Notes": fills the list, filters it as one types (writing the filter into the URL), and saves a new
// note's title once typing pauses, then opens the note's edit page.
"use strict";

const list = document.getElementById("notes");
if (list) {
  const finder = document.getElementById("finder");
  const input = document.getElementById("find-input");
  let notes = [];
  const show = () => {
    const wanted = input.value.trim().toLowerCase();
    list.replaceChildren(
      ...notes
        .filter((note) => note.title.toLowerCase().includes(wanted))
        .map((note) => {
          const item = document.createElement("li");
          const link = document.createElement("a");
          link.href = `/notes/${note.id}/edit`;
          link.textContent = note.title;
          item.append(link);
          return item;
        }),
    );
  };
  input.value = new URLSearchParams(location.search).get("find") || "";
  finder.hidden = input.value === "";
  fetch("/notes/api/list")
    .then((response) => response.json())
    .then((loaded) => {
      notes = loaded;
      show();
    });
  document.getElementById("find").addEventListener("click", () => {
    finder.hidden = false;
    input.focus();
  });
  input.addEventListener("input", () => {
    const url = new URL(location.href);
    url.searchParams.delete("saved");
    url.searchParams.set("find", input.value);
    history.replaceState(null, "", url);
    show();
  });
}

const draftStatus = document.getElementById("draft-status");
if (draftStatus) {
  const title = document.getElementById("title");
  let pause;
  title.addEventListener("input", () => {
    clearTimeout(pause);
    pause = setTimeout(async () => {
      draftStatus.textContent = "Saving…";
      const response = await fetch("/notes/api/draft", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title: title.value }),
      });
      const { id } = await response.json();
      location.assign(`/notes/${id}/edit`);
    }, 700);
  });
}
