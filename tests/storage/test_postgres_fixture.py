"""The PostgreSQL fixture gives each test a database of its own that really accepts writes."""

import sqlalchemy


def test_each_test_gets_an_empty_writable_database(postgres_url: str) -> None:
    engine = sqlalchemy.create_engine(postgres_url)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text("CREATE TABLE probe (id int primary key)"))
        connection.execute(sqlalchemy.text("INSERT INTO probe VALUES (1)"))
        assert connection.execute(sqlalchemy.text("SELECT count(*) FROM probe")).scalar_one() == 1
    engine.dispose()
