"""Read-only pages about the layout catalog inside the Airflow UI (an Airflow 3 plugin).

`plugins/layouts_plugin.py` mounts `pages.app.app` under `/layouts` of the api-server
(`fastapi_apps`) and adds a "Layouts" nav entry and a "Layout run" tab on every DAG
run (`external_views`). The pages:

    /layouts/           tables: per table and partition the active layout, and
                        every version with its lineage (run, parent, state)
    /layouts/run        one DAG run (?dag_id=&run_id=): each step's numbers from
                        its staging folder's metrics.json, the nightly's steps or a
                        partial reorganization's (layout_reoptimize); for a
                        layout_workload_monitor run its shift report instead, for
                        a layout_gc run its garbage report (what it deleted and kept)
    /layouts/skipping   what the routed queries of the last ?days= (default 7) skipped,
                        from the catalog's query history: per table and template
                        blocks and rows read of those there, the daily share of
                        blocks skipped, the most recent queries
    /layouts/plot/...   the PNG plots of those pages (matplotlib, Agg)

The modules, each importing only those below it:

    app        the FastAPI app and its routes (URL_PREFIX, app, create_app)
    auth       the Airflow login and DAG-run read access the routes depend on
    render_*   the HTML of each page (pure functions of records); markup: the shared parts
    plots      the PNG plots (matplotlib; loaded on the first plot request only)
    reports    the run and report files checked and turned into what the pages show
    data       the catalog and the warehouse read into plain records

The catalog is the one of LAYOUT_CATALOG_URL and the run staging folders are under
LAYOUT_WAREHOUSE (`layout_core.base.config.load_settings`, as for the jobs).
"""
