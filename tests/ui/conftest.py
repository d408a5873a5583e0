from tests.support.pg import postgres_url  # noqa: F401 - fixture
from tests.support.warehouse import engine, warehouse_url  # noqa: F401 - fixtures
