"""The Gradio teaching app: it renders the engine's StepRecords and RunResults, and computes
no decoding figures of its own. ``python app.py`` starts it; ``app.ui.build_app`` builds it."""
