() => {
  // Presentation mode (the classroom's checkbox adds the class sdl-present to the page):
  // arrow keys, Page Up/Down and space move between scenes, Esc leaves the mode.
  const keys = { ArrowRight: "lesson-next", PageDown: "lesson-next", " ": "lesson-next",
                 ArrowLeft: "lesson-prev", PageUp: "lesson-prev" };
  document.addEventListener("keydown", (event) => {
    if (!document.body.classList.contains("sdl-present")) return;
    const target = event.target;
    if (target && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName)
                   && target.type !== "checkbox")) return;
    if (event.key === "Escape") {
      const box = document.querySelector("#lesson-present input[type=checkbox]");
      if (box && box.checked) box.click();
      return;
    }
    const id = keys[event.key];
    if (!id) return;
    event.preventDefault();
    document.getElementById(id)?.click();
  });
}
