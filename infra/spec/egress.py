"""Where team pods go outside the cluster. A team namespace denies all egress but DNS, its own team and the Trainer
status server; what its pods must reach beyond that is declared once for the stack under `egress` and rendered as
the team's NetworkPolicies (infra/platform/network.py), then judged against what each pod must reach
(infra/checks/team_egress.py):

- `objectStore`: the address ranges of the object store that holds the teams' buckets (S3's published ranges of the
  region, Google's private.googleapis.com, the Blob private endpoint) and of the token service the pods exchange
  their federated identity at where it has ranges (Entra ID); every pod of a team reaches them, and so does a
  volume driver that runs inside the pod (GKE's GCS FUSE sidecar). A team's own `objectStorage` adds to them.
- `modelHub`: where the runtimes' `hf://` initializers download (the Hugging Face Hub's ranges, or the site's
  mirror or proxy); only the initializer pods reach it.

Where a cloud's pods fetch their workload identity credentials is a fact of the cloud (CREDENTIALS), added to the
store's destinations, not typed in the stack.
"""

from __future__ import annotations

from pydantic import Field

from infra.spec.base import Strict
from infra.spec.teams import Destination

# JobSet labels every pod with the name of its replicated job; a runtime's initializers are replicated jobs.
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
INITIALIZER_JOBS = ("dataset-initializer", "model-initializer")
HF_SCHEME = "hf://"
# CSI drivers whose data path runs inside the pod that mounts the volume (an injected sidecar), so the pod's own
# NetworkPolicies decide whether the volume mounts. GCS FUSE: GoogleCloudPlatform/gcs-fuse-csi-driver.
IN_POD_DRIVERS = {"gcsfuse.csi.storage.gke.io": "the GCS FUSE sidecar of its volume"}


# EKS: the Pod Identity agent's link-local address (the team data accounts are Pod Identity associations);
# GKE: the GKE metadata server, which serves Workload Identity tokens at 169.254.169.254:80, and where GKE's
# network policy guidance has it answer after the node's DNAT (169.254.169.252:988). AKS pods exchange their token
# with Entra ID over 443, whose ranges the stack declares under egress.objectStore.
CREDENTIALS: dict[str, tuple[tuple[str, int], ...]] = {  # cluster kind -> (range, TCP port)
    "eks": (("169.254.170.23/32", 80),),
    "gke": (("169.254.169.254/32", 80), ("169.254.169.252/32", 988)),
}


class Egress(Strict):
    """Where every team's pods go outside the cluster: `objectStore`, the object store of the teams' buckets (its
    endpoint's address ranges, and the identity token service's where the cloud has ranges; every pod, and the GCS
    FUSE sidecar), and `modelHub`, where the runtimes' hf:// initializers download (only their pods). A team's own
    `objectStorage` adds to `objectStore`; the cloud's credentials endpoint is added by Trainyard."""

    object_store: list[Destination] = Field(default_factory=list, alias="objectStore")
    model_hub: list[Destination] = Field(default_factory=list, alias="modelHub")


def store_destinations(egress: Egress, team_destinations: tuple[Destination, ...], kind: str,
                       cloud_store: bool) -> tuple[Destination, ...]:
    """What every pod of a team reaches to use its bucket: the stack's store, the team's own destinations, and on a
    cloud store the cloud's credentials endpoint (only once something is declared: without a store nothing is
    reached, and the check names the field)."""
    declared = [*egress.object_store, *(d for d in team_destinations if d not in egress.object_store)]
    credentials = CREDENTIALS.get(kind, ()) if cloud_store and declared else ()
    return (*declared, *(Destination(cidr=cidr, ports=[port]) for cidr, port in credentials))
