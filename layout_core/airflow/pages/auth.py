"""Who may see the pages: an Airflow user, checked the way the api-server checks its own
endpoints, and for a run's page and plots read access to that DAG's runs."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Depends, HTTPException, Request

log = logging.getLogger("layout.airflow_plugin")


async def require_user(request: Request) -> Any:
    """The Airflow user of the request, authenticated exactly as the api-server's own endpoints
    do it (`airflow.api_fastapi.core_api.security.get_user`): the JWT of an `Authorization:
    Bearer` header, else the `_token` cookie of the UI. 401 without either, 401/403 for an
    expired or invalid token."""
    # inside: about half a second to import, and every Airflow process imports the app, only the api-server serves it
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    try:
        return await get_user(request, None, credentials)
    except HTTPException:
        raise
    except RuntimeError as e:  # no auth manager in this process: fail closed
        log.warning("cannot authenticate a layouts page request: %s", e)
        raise HTTPException(status_code=401, detail="Not authenticated") from None


def require_run_reader(request: Request, user: Any = Depends(require_user)) -> Any:
    """The user, who must also be allowed to read the runs of the page's DAG."""
    # inside: the api-server's app module is as heavy as the security one above
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    dag_id = request.query_params.get("dag_id") or ""
    if not get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                details=DagDetails(id=dag_id), user=user):
        raise HTTPException(status_code=403, detail="Forbidden")
    return user
