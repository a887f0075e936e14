"""Figures: each function takes a tidy DataFrame and returns a matplotlib Figure; nothing here
trains, loads models or reads the store. :func:`robustkit.plots.style.save_pdf` writes them."""
