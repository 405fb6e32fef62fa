"""Where clusters can run: the regions of each cloud and the zones in them, so that a misspelt region, a zone
that does not exist or a zone of another region is refused at plan time instead of failing halfway through
`pulumi up`.

Sources (public region tables, as of 2025; add a row here when a provider opens a region):
- AWS: "Regions and Availability Zones" (docs.aws.amazon.com/global-infrastructure/latest/regions/
  aws-regions.html) and `aws ec2 describe-availability-zones`. Zone names are mapped per account, and some
  regions skip a letter (ca-central-1 a, b, d; ap-northeast-1 a, c, d), so a zone is accepted when its letter is
  within the letters the region uses.
- Google Cloud: "Regions and zones" (cloud.google.com/compute/docs/regions-zones), zone suffixes per region.
- Azure: `az account list-locations` and "Azure regions with availability zones"
  (learn.microsoft.com/azure/reliability/availability-zones-region-support); AKS zones are 1, 2 and 3 in a
  location with availability zones, none elsewhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping

# region -> the zone letters its zone names end with
AWS_ZONES: Mapping[str, str] = {
    "us-east-1": "abcdef", "us-east-2": "abc", "us-west-1": "abc", "us-west-2": "abcd",
    "ca-central-1": "abd", "ca-west-1": "abc", "mx-central-1": "abc", "sa-east-1": "abc",
    "eu-central-1": "abc", "eu-central-2": "abc", "eu-west-1": "abc", "eu-west-2": "abc", "eu-west-3": "abc",
    "eu-south-1": "abc", "eu-south-2": "abc", "eu-north-1": "abc",
    "il-central-1": "abc", "me-south-1": "abc", "me-central-1": "abc", "af-south-1": "abc",
    "ap-east-1": "abc", "ap-south-1": "abc", "ap-south-2": "abc", "ap-northeast-1": "abcd",
    "ap-northeast-2": "abcd", "ap-northeast-3": "abc", "ap-southeast-1": "abc", "ap-southeast-2": "abc",
    "ap-southeast-3": "abc", "ap-southeast-4": "abc", "ap-southeast-5": "abc", "ap-southeast-7": "abc",
}

_GCP_ABC = "abc"
GCP_ZONES: Mapping[str, str] = {
    "us-central1": "abcf", "us-east1": "bcd", "us-east4": _GCP_ABC, "us-east5": _GCP_ABC, "us-south1": _GCP_ABC,
    "us-west1": _GCP_ABC, "us-west2": _GCP_ABC, "us-west3": _GCP_ABC, "us-west4": _GCP_ABC,
    "northamerica-northeast1": _GCP_ABC, "northamerica-northeast2": _GCP_ABC, "southamerica-east1": _GCP_ABC,
    "southamerica-west1": _GCP_ABC,
    "europe-west1": "bcd", "europe-west2": _GCP_ABC, "europe-west3": _GCP_ABC, "europe-west4": _GCP_ABC,
    "europe-west6": _GCP_ABC, "europe-west8": _GCP_ABC, "europe-west9": _GCP_ABC, "europe-west10": _GCP_ABC,
    "europe-west12": _GCP_ABC, "europe-north1": _GCP_ABC, "europe-central2": _GCP_ABC,
    "europe-southwest1": _GCP_ABC,
    "me-west1": _GCP_ABC, "me-central1": _GCP_ABC, "me-central2": _GCP_ABC, "africa-south1": _GCP_ABC,
    "asia-east1": _GCP_ABC, "asia-east2": _GCP_ABC, "asia-northeast1": _GCP_ABC, "asia-northeast2": _GCP_ABC,
    "asia-northeast3": _GCP_ABC, "asia-south1": _GCP_ABC, "asia-south2": _GCP_ABC,
    "asia-southeast1": _GCP_ABC, "asia-southeast2": _GCP_ABC,
    "australia-southeast1": _GCP_ABC, "australia-southeast2": _GCP_ABC,
}

# Azure locations; True where the location has availability zones (AKS zones 1, 2, 3).
AZURE_LOCATIONS: Mapping[str, bool] = {
    "eastus": True, "eastus2": True, "centralus": True, "southcentralus": True, "westus2": True, "westus3": True,
    "westus": False, "northcentralus": False, "westcentralus": False,
    "canadacentral": True, "canadaeast": False, "brazilsouth": True, "mexicocentral": True,
    "northeurope": True, "westeurope": True, "uksouth": True, "ukwest": False, "francecentral": True,
    "germanywestcentral": True, "norwayeast": True, "swedencentral": True, "switzerlandnorth": True,
    "polandcentral": True, "italynorth": True, "spaincentral": True,
    "uaenorth": True, "qatarcentral": True, "israelcentral": True, "southafricanorth": True,
    "eastasia": True, "southeastasia": True, "japaneast": True, "japanwest": False, "koreacentral": True,
    "australiaeast": True, "australiasoutheast": False, "centralindia": True, "southindia": False,
}
AKS_ZONES = ("1", "2", "3")


def _unknown(what: str, value: str, known: Iterable[str], source: str) -> str:
    near = difflib.get_close_matches(value, list(known), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    return f"'{value}' is not {what}: {hint}known ones are listed in infra/spec/regions.py ({source})"


def _catalog_check(what: str, known: Collection[str], source: str) -> Callable[[str], str]:
    """A validator that passes a name of the catalog `known` and refuses any other with the closest ones."""
    def check(value: str) -> str:
        if value not in known:
            raise ValueError(_unknown(what, value, known, source))
        return value
    return check


aws_region = _catalog_check("an AWS region", AWS_ZONES, "AWS Regions and Availability Zones")


def aws_zone_problem(region: str, zone: str) -> str | None:
    """Why `zone` is not a zone of the AWS region, or None."""
    letters = AWS_ZONES.get(region, "")
    if zone.removesuffix(zone[-1:]) != region:
        return f"'{zone}' is not in region {region}: use {region} followed by a zone letter ({', '.join(letters)})"
    if zone[-1:] not in letters:
        return f"'{zone}' is not a zone of {region}: its zones end in {', '.join(letters)}"
    return None


gcp_region = _catalog_check("a Google Cloud region", GCP_ZONES, "Google Cloud regions and zones")


def gcp_zone_problem(region: str, zone: str) -> str | None:
    letters = GCP_ZONES.get(region, "")
    if not zone.startswith(f"{region}-") or len(zone) != len(region) + 2:
        return f"'{zone}' is not in region {region}: use {region}-<letter> ({', '.join(letters)})"
    if zone[-1] not in letters:
        return f"'{zone}' is not a zone of {region}: its zones end in {', '.join(letters)}"
    return None


azure_location = _catalog_check("an Azure location", AZURE_LOCATIONS, "az account list-locations")


def azure_zones(location: str) -> tuple[str, ...]:
    """The AKS zones of a location: 1, 2, 3 where it has availability zones, none elsewhere."""
    return AKS_ZONES if AZURE_LOCATIONS.get(location) else ()
