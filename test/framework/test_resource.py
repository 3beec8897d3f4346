import pytest

from caldera.framework import resource as resource_module
from caldera.framework.resource import Resource, ResourceError


def res(**kw):
    scalars = {k.replace("_", "/"): v for k, v in kw.items() if k not in ("cpu", "memory", "pods")}
    return Resource(kw.get("cpu", 0), kw.get("memory", 0), kw.get("pods", 0), scalars)


def test_from_resource_list_units():
    r = Resource.from_resource_list({"cpu": "1500m", "memory": "2Gi", "pods": "110", "nvidia.com/gpu": "2"})
    assert r.cpu == 1500
    assert r.memory == 2 * 2**30
    assert r.pods == 110
    assert r.scalars == {"nvidia.com/gpu": 2000}  # scalars in thousandths, as Volcano keeps them


def test_bad_quantity_names_resource_and_value():
    with pytest.raises(ResourceError) as info:
        Resource.from_resource_list({"cpu": "1", "memory": "lots"})
    assert "memory" in str(info.value)
    assert "lots" in str(info.value)


def test_add_and_sub_with_missing_scalar_dimensions():
    a = Resource(1000, 100, scalars={"gpu": 1000})
    b = Resource(500, 50, scalars={"fpga": 2000})
    total = a + b
    assert total.scalars == {"gpu": 1000, "fpga": 2000}
    assert total.cpu == 1500
    back = total - b
    assert back == a
    assert back.scalars["fpga"] == 0


def test_zero_resources():
    z = Resource()
    assert z.is_empty()
    assert (z + z).is_empty()
    assert z.less_equal(Resource())
    assert (z - z) == z


def test_subtraction_below_zero_is_clamped_and_reported_not_raised():
    before = resource_module.underflow_count()
    r = Resource(1000, 100, scalars={"gpu": 1000})
    r.sub(Resource(3000, 50, scalars={"gpu": 5000, "fpga": 1000}))
    assert r.cpu == 0
    assert r.memory == 50
    assert r.scalars["gpu"] == 0
    assert r.scalars["fpga"] == 0
    assert resource_module.underflow_count() == before + 3


def test_tiny_float_noise_is_not_an_underflow():
    before = resource_module.underflow_count()
    Resource(0.3).sub(Resource(0.30000000001))
    assert resource_module.underflow_count() == before


def test_less_equal_missing_dimension_semantics():
    wants_gpu = Resource(1000, 0, scalars={"nvidia.com/gpu": 1000})
    node_without_gpu = Resource(4000, 2**30)
    assert not wants_gpu.less_equal(node_without_gpu, missing="zero")
    assert wants_gpu.less_equal(node_without_gpu, missing="infinity")
    # A dimension the left side lacks is zero, which always fits.
    assert Resource(1000).less_equal(Resource(1000, 0, scalars={"gpu": 1000}))


def test_less_equal_tolerates_min_resource():
    assert Resource(1000.05).less_equal(Resource(1000))
    assert not Resource(1000.2).less_equal(Resource(1000))


def test_multiply_min_max():
    r = Resource(1000, 200, scalars={"gpu": 4000}).multiply(0.5)
    assert (r.cpu, r.memory, r.scalars["gpu"]) == (500, 100, 2000)
    m = Resource(100, 500).set_max(Resource(300, 200, scalars={"gpu": 1}))
    assert (m.cpu, m.memory, m.scalars["gpu"]) == (300, 500, 1)
    low = Resource(100, 500, scalars={"gpu": 7}).min_dimension(Resource(50, 600))
    assert (low.cpu, low.memory, low.scalars["gpu"]) == (50, 500, 7)
    low_zero = Resource(100, 500, scalars={"gpu": 7}).min_dimension(Resource(50, 600), missing="zero")
    assert low_zero.scalars["gpu"] == 0


def test_exceeded_part_is_clamped_per_dimension():
    over = Resource(3000, 100, scalars={"gpu": 1000}).exceeded_part(
        Resource(1000, 400, scalars={"gpu": 3000})
    )
    assert over.cpu == 2000
    assert over.memory == 0
    assert "gpu" not in over.scalars
    assert Resource().exceeded_part(Resource(5, 5)).is_empty()


def test_less_and_partly():
    assert Resource(1, 1).less(Resource(2, 2))
    assert not Resource(2, 1).less(Resource(2, 2))
    assert Resource(1, 5).less_partly(Resource(2, 2))
    assert not Resource(3, 3).less_partly(Resource(2, 2))
    assert Resource(5, 1).less_equal_partly(Resource(2, 2))


def test_fit_shortfall_names_dimensions():
    assert Resource(2000, 10, 1, {"gpu": 1000}).fit_shortfall(Resource(1000, 100, 0)) == [
        "cpu",
        "pods",
        "gpu",
    ]
