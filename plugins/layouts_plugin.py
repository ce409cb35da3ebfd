"""The "Layouts" pages in the Airflow UI: registration only (the app is layout_core.airflow.pages.app).

Point Airflow's plugins folder here (AIRFLOW__CORE__PLUGINS_FOLDER; `make airflow`
and layout_core.airflow.deployment do) and restart the api-server after a change.
"""

from airflow.plugins_manager import AirflowPlugin

from layout_core.airflow.pages.app import URL_PREFIX, app


class LayoutsPlugin(AirflowPlugin):
    name = "layouts"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Layouts"}]
    # hrefs are relative to the UI's <base href> (the api-server's base_url); the UI shows
    # them in a same-origin iframe, whose requests carry the `_token` cookie the pages check.
    external_views = [
        {"name": "Layouts", "href": URL_PREFIX.lstrip("/") + "/", "destination": "nav",
         "url_route": "layouts"},
        {"name": "Layout run", "href": URL_PREFIX.lstrip("/") + "/run?dag_id={DAG_ID}&run_id={RUN_ID}",
         "destination": "dag_run", "url_route": "layout-run"},
    ]
