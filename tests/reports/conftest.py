from tests.pg import postgres_url  # noqa: F401 - fixture
from tests.warehouse.conftest import engine, real_documents, warehouse_url  # noqa: F401 - fixtures
