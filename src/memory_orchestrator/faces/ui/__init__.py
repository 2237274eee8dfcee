"""The inspector: a local web face to see what the memory holds and why.

    app.py         the Starlette app (routes, errors as pages) and `serve`
    guard.py       who may look and what: loopback, bearer tokens, sessions, CSRF, headers
    pages.py       memories (search, filters, paging), one memory, forget, the graph
    trace_pages.py the requests (list, one trace, replay), health, the eval report
    views.py       numbers made into geometry: score bars, stage bars; links, times, pages
    graph_svg.py   the graph laid out on the server, in rings by hop
    evaldir.py     the `eval --out` folder's report and plots
    templates/     Jinja2 templates (autoescaping on), static/ the stylesheet

Like the other faces it calls the service (`Orchestrator` and its `inspection()`), never a
backend; every asset ships in the package and nothing is fetched at run time.
"""
