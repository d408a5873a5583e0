from tests.pg import postgres_url  # noqa: F401 - fixture
from tests.warehouse.conftest import engine, warehouse_url  # noqa: F401 - fixtures
