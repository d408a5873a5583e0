"""The warehouse tier's fixtures (:mod:`tests.support.warehouse`; the reports and UI tiers use them too)."""

from tests.support.pg import postgres_url  # noqa: F401 - fixture
from tests.support.warehouse import engine, real_documents, warehouse_url  # noqa: F401 - fixtures
