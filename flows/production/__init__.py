"""Production moves: the promotion gate, promote and rollback with their record, a
person's approval, the serving server kept in step with the registry, and each move
as a Prefect flow."""
