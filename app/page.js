() => {
  // Gradio's own words (the upload box's "Drop File Here") follow its frontend locale, which it takes from the
  // browser: make it the page's language, now and on a switch (ui.py). Gradio's Settings panel switches the locale
  // with the changeLocale export of its core module: the same call, on the module this page loaded. A locale
  // whose words are still loading would land after a later one: one switch at a time, each until it holds
  // (up to 30 s: a busy server can take seconds to send a locale's words).
  // Gradio words a component when it is first drawn: a switch reaches what is drawn after it (a tab opened later).
  const GRADIO_LOCALES = { zh: "zh-CN", en: "en" };  // app/i18n.py LANGS
  const switchLocale = async (locale) => {
    const core = performance.getEntriesByType("resource").map((entry) => entry.name)
      .find((name) => /\/core-[\w-]+\.js$/.test(name));
    if (!core || !locale) return;
    (await import(core)).changeLocale(locale);
    for (let waited = 0; document.documentElement.lang !== locale && waited < 30000; waited += 50) {
      await new Promise((done) => setTimeout(done, 50));
    }
    document.body.dataset.sdlLocale = locale;  // the last switch that has finished (tests wait on it)
  };
  let switching = Promise.resolve();
  window.sdlGradioLocale = (lang) => (switching = switching.then(() => switchLocale(GRADIO_LOCALES[lang])));
  window.sdlGradioLocale(document.querySelector("#lang-toggle input:checked")?.value);

  // Presentation mode (the classroom's checkbox adds the class sdl-present to the page):
  // arrow keys, Page Up/Down and space move between scenes, Esc leaves the mode. Keys typed into a field
  // (text, number, slider, list) stay there; a clicked answer (a button, a checkbox, a radio) keeps the focus
  // after the click, and the keys must still reach the scenes.
  const keys = { ArrowRight: "lesson-next", PageDown: "lesson-next", " ": "lesson-next",
                 ArrowLeft: "lesson-prev", PageUp: "lesson-prev" };
  const CLICKED_INPUTS = ["checkbox", "radio", "button", "submit"];
  const typing = (target) => target && (target.isContentEditable || ["TEXTAREA", "SELECT"].includes(target.tagName)
                                        || target.tagName === "INPUT" && !CLICKED_INPUTS.includes(target.type));
  document.addEventListener("keydown", (event) => {
    if (!document.body.classList.contains("sdl-present") || typing(event.target)) return;
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

  // A file over the server's upload limit (max_file_size): Gradio would refuse it with a bare "Error" in the
  // box. Take it away from Gradio first (capture phase, before the upload's own listeners) and press the
  // upload's hidden "<id>-refused" button, whose handler says the limit in the page's language (app.views.upload).
  const limit = window.gradio_config && window.gradio_config.max_file_size;
  const refusal = (target) => Array.from(document.querySelectorAll("button[id$='-refused']"))
    .find((button) => document.getElementById(button.id.replace(/-refused$/, ""))?.contains(target));
  const refuse = (event, files) => {
    const button = limit && refusal(event.target);
    if (!button || !Array.from(files || []).some((file) => file.size > limit)) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    if (event.target.type === "file") event.target.value = "";
    button.click();
  };
  window.addEventListener("change", (event) => refuse(event, event.target.files), true);
  window.addEventListener("drop", (event) => refuse(event, event.dataTransfer?.files), true);

  // A phone (app/phone.css): a figure that reads narrower than a phone's default plot width says so in
  // layout.meta.min_width (app/phone.py); a figure or table still wider than its box scrolls sideways inside it, and
  // its block is marked sdl-scrolls so the cue under it shows. Checked after every change to the page (a redrawn
  // plot, a new table), every resize of the window or of a plot or table, at most every 150 ms.
  const PHONE = window.matchMedia("(max-width: 700px)");
  const fitPlots = () => document.querySelectorAll(".js-plotly-plot").forEach((plot) => {
    const width = PHONE.matches && plot.layout && plot.layout.meta && plot.layout.meta.min_width;
    const wanted = width ? `${width}px` : "";
    if (plot.style.minWidth === wanted) return;
    plot.style.minWidth = wanted;
    if (window.Plotly && plot.offsetParent) window.Plotly.Plots.resize(plot);
  });
  const watched = new WeakSet();  // each plot and table, watched for a change of size (a redraw, a tab shown)
  const resized = new ResizeObserver(() => check());
  const markScrolls = () => {
    const scrollers = new Map();  // block -> whether it holds something wider than its box
    document.querySelectorAll(".js-plotly-plot, .virtual-table-viewport").forEach((element) => {
      if (!watched.has(element)) { watched.add(element); resized.observe(element); }
      const block = element.closest(".block");
      if (!block) return;
      const box = element.classList.contains("js-plotly-plot") ? block : element;
      scrollers.set(block, scrollers.get(block) || box.scrollWidth > box.clientWidth + 2);
    });
    scrollers.forEach((wide, block) => block.classList.toggle("sdl-scrolls", wide && PHONE.matches));
  };
  let pending = null;
  const check = () => {
    if (pending) return;
    pending = setTimeout(() => { pending = null; fitPlots(); markScrolls(); }, 150);
  };
  new MutationObserver(check).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", check);
  check();
}
