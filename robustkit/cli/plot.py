"""`robustkit plot ...`: one verb per registered figure (robustkit.figures), its flags from the
figure's parameters; draws it and writes the PDF."""

from __future__ import annotations

import dataclasses

from robustkit.cli.analyze import add_param, store_arguments
from robustkit.cli.arguments import output_file

REUSED = "for a run with no frame cached at another size; else its largest cached one"


def add_parser(commands) -> None:
    from robustkit.analysis.reuse import SAMPLE_SIZES
    from robustkit.figures import FIGURES

    plot = commands.add_parser(
        "plot",
        help="render a paper figure from a store as PDF",
        description="Runs the figure's analysis (cached) and writes the figure as PDF. The same figures are drawn in "
        "a notebook by robustkit.figures.draw(name, store, ...).",
    )
    verbs = plot.add_subparsers(dest="figure", required=True, help="the figure to render")
    for name, figure in FIGURES.items():
        parser = verbs.add_parser(name, help=figure.help, description=figure.help)
        store_arguments(parser)
        parser.add_argument("-o", "--output", required=True, type=output_file, help="PDF file to write")
        # --subtitle / --footer: robustkit reproduce passes the recipe's stand-in note and the
        # paper's claim with its verdict
        parser.add_argument(
            "--subtitle", help="a second title line, e.g. 'minilm-l6 on rt, stand-in for BERT-base on SST-2'"
        )
        parser.add_argument(
            "--footer",
            help="text under the figure, wrapped to its width; '\\n' separates paragraphs (e.g. the claim and its "
            "verdict)",
        )
        for param in (*figure.parameters, *figure.options):  # options: the analysis's (--device, ...)
            if param.name in SAMPLE_SIZES and param in figure.analysis_parameters:
                param = dataclasses.replace(param, default_note=REUSED)
            add_param(parser, param)
        # a sample size not given reads the cached frames at whatever size they were computed
        # (robustkit.analysis.reuse); its help still states the default computed where none is
        parser.set_defaults(**{p.name: None for p in figure.analysis_parameters if p.name in SAMPLE_SIZES})
        parser.set_defaults(func=run)


def run(args) -> int:
    from robustkit import figures
    from robustkit.analysis.reuse import SAMPLE_SIZES
    from robustkit.figures.style import save_pdf
    from robustkit.progress import heartbeat

    figure = figures.get(args.figure)
    params = {p.name: getattr(args, p.name) for p in (*figure.parameters, *figure.options)}
    # a sample size left out (None: no such flag given) reads what is cached (robustkit.analysis.reuse)
    params = {k: v for k, v in params.items() if not (v is None and k in SAMPLE_SIZES)}
    with heartbeat(f"plot {args.figure}"):  # its analysis's runs say their own; the view and drawing too
        fig = figure.draw(args.store, args.select, subtitle=args.subtitle, footer=args.footer, any_size=True, **params)
        written = save_pdf(fig, args.output)
    print(f"wrote {written}")
    return 0
